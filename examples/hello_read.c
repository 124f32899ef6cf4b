/* hello_read: README's second program. Prints topic 1's entries in GLSN order, from the
 * first, until none came for a second.   hello_read 127.0.0.1:9092 */
#include <stdio.h>

#include <varlog/varlog.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: hello_read METADATA_ADDRESS\n");
        return 2;
    }
    char err[256] = "out of memory";
    varlog_conf_t *conf = varlog_conf_new();
    varlog_client_t *client;
    if (!conf || varlog_conf_set(conf, "metadata.addresses", argv[1], err, sizeof err) ||
        varlog_client_new(&conf, &client, err, sizeof err)) {
        fprintf(stderr, "hello_read: %s\n", err);
        varlog_conf_destroy(conf);
        return 1;
    }
    varlog_subscription_t *sub = NULL; /* from GLSN 1 on; VARLOG_GLSN_MAX: no end, it tails */
    varlog_err_t rc = varlog_subscribe_iter(client, 1 /* topic */, 1, VARLOG_GLSN_MAX, &sub);
    varlog_entry_t e;
    while (rc == VARLOG_OK && (rc = varlog_subscription_next(sub, 1000 /* ms */, &e)) == VARLOG_OK)
        printf("GLSN %llu: %.*s\n", (unsigned long long)e.meta.glsn, (int)e.len,
               (const char *)e.data); /* e.data is valid until the next call */
    if (rc != VARLOG_ERR_TIMED_OUT)   /* TIMED_OUT: a second without a new entry, we stop */
        fprintf(stderr, "hello_read: %s: %s\n", varlog_err_name(rc), varlog_last_error());
    varlog_subscription_close(&sub); /* accepts NULL: a subscription that never opened */
    varlog_client_destroy(client);
    return rc == VARLOG_ERR_TIMED_OUT ? 0 : 1;
}
