/* consumer: reads a topic in global order (GLSN) with the iterator form of
 * varlog_subscribe_iter.
 *
 *     consumer METADATA_ADDRESSES [TOPIC [COUNT]]
 *
 * Reads from the topic's first entry and stops after COUNT entries (0, the default: no
 * limit) or after 5 seconds without a new one. Prints the first entries and a count. Exit
 * status 0 when it read COUNT entries (any number for 0), 1 otherwise.
 *
 * What it shows: entries come in strictly increasing GLSN across all the topic's log
 * streams; an entry's bytes belong to the library until the next call; TIMED_OUT only
 * means nothing new arrived yet; a subscription ends with END (its range is complete),
 * TRIMMED (it began in a trimmed prefix) or a failure; close before destroying the
 * client. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <varlog/varlog.h>

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: consumer METADATA_ADDRESSES [TOPIC [COUNT]]\n");
        return 2;
    }
    int32_t topic = argc > 2 ? (int32_t)atoi(argv[2]) : 1;
    long count = argc > 3 ? atol(argv[3]) : 0;
    if (topic < 1 || count < 0) {
        fprintf(stderr, "consumer: TOPIC must be positive and COUNT not negative\n");
        return 2;
    }

    char err[256];
    varlog_conf_t *conf = varlog_conf_new();
    if (!conf || varlog_conf_set(conf, "metadata.addresses", argv[1], err, sizeof err)) {
        fprintf(stderr, "consumer: %s\n", conf ? err : "out of memory");
        varlog_conf_destroy(conf);
        return 1;
    }
    varlog_client_t *client;
    if (varlog_client_new(&conf, &client, err, sizeof err) != VARLOG_OK) {
        fprintf(stderr, "consumer: %s\n", err);
        varlog_conf_destroy(conf);
        return 1;
    }

    /* [1, VARLOG_GLSN_MAX): from the first entry on, tailing the topic for ever */
    varlog_subscription_t *sub;
    varlog_err_t rc = varlog_subscribe_iter(client, topic, 1, VARLOG_GLSN_MAX, &sub);
    if (rc != VARLOG_OK) {
        fprintf(stderr, "consumer: subscribe: %s: %s\n", varlog_err_name(rc), varlog_last_error());
        varlog_client_destroy(client);
        return 1;
    }
    long n = 0, idle_ms = 0;
    uint64_t prev = 0;
    int status = 0;
    varlog_entry_t e;
    while (count == 0 || n < count) {
        rc = varlog_subscription_next(sub, 500, &e);
        if (rc == VARLOG_ERR_TIMED_OUT) {
            idle_ms += 500;
            if (idle_ms >= 5000)
                break; /* caught up with the writers */
            continue;
        }
        if (rc != VARLOG_OK) {
            /* END: the range is complete (not with an end of VARLOG_GLSN_MAX); TRIMMED: the
             * range began below the trim point, varlog_peek gives the first entry left;
             * anything else is a failure the subscription could not recover from */
            if (rc != VARLOG_ERR_END) {
                fprintf(stderr, "consumer: %s: %s\n", varlog_err_name(rc), varlog_last_error());
                status = 1;
            }
            break;
        }
        idle_ms = 0;
        if (e.meta.glsn <= prev) { /* the library promises strictly increasing GLSNs */
            fprintf(stderr, "consumer: GLSN %llu after %llu\n", (unsigned long long)e.meta.glsn,
                    (unsigned long long)prev);
            status = 1;
        }
        prev = e.meta.glsn;
        n++;
        /* e.data is valid until the next varlog_subscription_next: copy what must outlive it */
        if (n <= 3)
            printf("GLSN %llu (log stream %d, LLSN %llu): %.*s\n", (unsigned long long)e.meta.glsn,
                   e.meta.log_stream_id, (unsigned long long)e.meta.llsn, (int)e.len,
                   (const char *)e.data);
    }
    varlog_subscription_close(&sub); /* before the client: no entry is touched after it */
    varlog_client_destroy(client);
    printf("consumer: %ld entries of topic %d, last GLSN %llu\n", n, topic,
           (unsigned long long)prev);
    if (count > 0 && n < count)
        status = 1;
    return status;
}
