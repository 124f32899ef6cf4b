/* hello_append: README's first program. Appends TEXT as one record to topic 1 and prints
 * the GLSN it was stored at.   hello_append 127.0.0.1:9092 "hello, varlog" */
#include <stdio.h>
#include <string.h>

#include <varlog/varlog.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: hello_append METADATA_ADDRESS TEXT\n");
        return 2;
    }
    char err[256] = "out of memory";
    varlog_conf_t *conf = varlog_conf_new();
    varlog_client_t *client;
    if (!conf || varlog_conf_set(conf, "metadata.addresses", argv[1], err, sizeof err) ||
        varlog_client_new(&conf, &client, err, sizeof err)) {
        fprintf(stderr, "hello_append: %s\n", err); /* what failed and where */
        varlog_conf_destroy(conf);                  /* the client took it only on success */
        return 1;
    }
    varlog_record_t rec = {.data = argv[2], .len = strlen(argv[2])};
    varlog_entry_meta_t meta;
    varlog_outcome_t outcome;
    varlog_err_t rc = varlog_append(client, 1 /* topic */, &rec, 1, 5000 /* ms */, &meta, &outcome);
    if (rc == VARLOG_OK)
        printf("stored at GLSN %llu\n", (unsigned long long)meta.glsn);
    else /* NOT_APPENDED: certainly not stored; MAYBE_APPENDED: perhaps */
        fprintf(stderr, "hello_append: %s, %s: %s\n", varlog_err_name(rc),
                varlog_outcome_name(outcome), varlog_last_error());
    varlog_client_destroy(client);
    return rc == VARLOG_OK ? 0 : 1;
}
