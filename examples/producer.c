/* producer: appends COUNT records to a topic through the pipelined appender and handles
 * every outcome.
 *
 *     producer METADATA_ADDRESSES [TOPIC [COUNT]]
 *
 * e.g. `producer 127.0.0.1:9092 1 1000` against varlog-server or a Varlog cluster's
 * metadata repository. Record i holds the text "record i". Exit status 0 when every record
 * was stored, 1 otherwise.
 *
 * What it shows: one appender shared by the program (topic-wide: log_stream_id 0), append
 * calls that return once the record is queued, a callback per call on the appender's
 * thread, what to do with each outcome (APPENDED: done; NOT_APPENDED: certainly not stored,
 * safe to append again; MAYBE_APPENDED: perhaps stored, appending again may store it twice),
 * flush to wait for the callbacks, and close before the client is destroyed; and giving up
 * cleanly when appends fail (a dead cluster): no new records once a callback reported a
 * failure, and every pending call settles within appender.delivery.timeout.ms. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <varlog/varlog.h>

/* What the callback learnt about record i. The callbacks run on the appender's thread;
 * varlog_appender_flush returns after the last one, which orders their writes before the
 * main thread reads the array. */
enum { PENDING = 0, STORED, NOT_STORED, MAYBE_STORED };

typedef struct record_state {
    unsigned char fate;
    uint64_t glsn;
} record_state_t;

/* Set by the first failed callback: the main thread then stops queuing records. */
static atomic_bool failing;
/* Set by the first successful callback, which reports the run's first stored record. */
static atomic_bool stored_one;

static void on_appended(const varlog_append_result_t *res, void *opaque)
{
    record_state_t *rs = opaque;
    if (res->err == VARLOG_OK) {
        rs->fate = STORED;
        rs->glsn = res->metas[0].glsn;
        /* progress a watcher can wait for: the cluster took the first record */
        if (!atomic_exchange(&stored_one, true))
            fprintf(stderr, "producer: first record stored at GLSN %llu\n",
                    (unsigned long long)rs->glsn);
        return;
    }
    if (res->outcome == VARLOG_NOT_APPENDED) {
        rs->fate = NOT_STORED;
    } else {
        rs->fate = MAYBE_STORED;
    }
    /* res->errtext says which log stream, node and attempt failed, and why; a dead cluster
     * fails every pending call, so only the first failure is printed */
    if (!atomic_exchange(&failing, true))
        fprintf(stderr, "producer: append failed (%s, %s): %s\n", varlog_err_name(res->err),
                varlog_outcome_name(res->outcome), res->errtext);
}

/* Queues record i; waits up to a second at a time while the appender's queue is full. */
static varlog_err_t append_one(varlog_appender_t *app, record_state_t *states, long i)
{
    char text[64];
    int len = snprintf(text, sizeof text, "record %ld", i);
    varlog_record_t rec = {.data = text, .len = (size_t)len};
    states[i].fate = PENDING;
    for (;;) {
        /* the record is copied before the call returns: text may go out of scope */
        varlog_err_t rc = varlog_appender_append(app, &rec, 1, 1000, on_appended, &states[i]);
        if (rc != VARLOG_ERR_QUEUE_FULL)
            return rc; /* OK, or CLOSED / INVALID_ARG: the callback will not run */
        fprintf(stderr, "producer: queue still full after 1 s (the cluster is slow), waiting\n");
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: producer METADATA_ADDRESSES [TOPIC [COUNT]]\n");
        return 2;
    }
    int32_t topic = argc > 2 ? (int32_t)atoi(argv[2]) : 1;
    long count = argc > 3 ? atol(argv[3]) : 1000;
    if (topic < 1 || count < 1) {
        fprintf(stderr, "producer: TOPIC and COUNT must be positive\n");
        return 2;
    }

    char err[256];
    varlog_conf_t *conf = varlog_conf_new();
    if (!conf || varlog_conf_set(conf, "metadata.addresses", argv[1], err, sizeof err) ||
        varlog_conf_set(conf, "appender.linger.ms", "2", err, sizeof err)) {
        fprintf(stderr, "producer: %s\n", conf ? err : "out of memory");
        varlog_conf_destroy(conf);
        return 1;
    }
    varlog_client_t *client;
    if (varlog_client_new(&conf, &client, err, sizeof err) != VARLOG_OK) {
        fprintf(stderr, "producer: %s\n", err); /* names the address and what failed */
        varlog_conf_destroy(conf);              /* still ours: the client takes it on success */
        return 1;
    }
    varlog_appender_t *app;
    varlog_err_t rc = varlog_appender_new(client, topic, 0 /* topic-wide */, &app);
    if (rc != VARLOG_OK) {
        fprintf(stderr, "producer: appender: %s: %s\n", varlog_err_name(rc), varlog_last_error());
        varlog_client_destroy(client);
        return 1;
    }

    record_state_t *states = calloc((size_t)count, sizeof *states);
    int status = states ? 0 : 1;
    long queued = 0;
    for (long i = 0; i < count && status == 0; i++) {
        if (atomic_load(&failing)) {
            /* Appends fail: stop queuing. What is pending settles within
             * appender.delivery.timeout.ms (30 s), however dead the cluster is. */
            fprintf(stderr, "producer: giving up after %ld of %ld records were queued\n", i, count);
            status = 1;
            break;
        }
        if ((rc = append_one(app, states, i)) != VARLOG_OK) {
            fprintf(stderr, "producer: append: %s: %s\n", varlog_err_name(rc), varlog_last_error());
            status = 1;
        }
        queued = i + 1;
    }

    /* Records certainly not stored may be appended again; one more round here, unless
     * appends are failing anyway. Records that may have been stored are not: appending them
     * again could store them twice, so an application that needs them either tolerates
     * duplicates or checks the log first. */
    for (int round = 0; round < 2 && status == 0; round++) {
        size_t pending = 0;
        rc = varlog_appender_flush(app, 30000, &pending); /* every callback has run */
        if (rc != VARLOG_OK) {
            fprintf(stderr, "producer: flush: %s (%zu calls pending)\n", varlog_err_name(rc),
                    pending);
            status = 1;
            break;
        }
        if (round == 1)
            break;
        atomic_store(&failing, false);
        for (long i = 0; i < count && status == 0; i++)
            if (states[i].fate == NOT_STORED && append_one(app, states, i) != VARLOG_OK)
                status = 1;
    }
    if (status != 0) /* every callback of what was queued, within the delivery timeout */
        (void)varlog_appender_flush(app, -1, NULL);

    /* close before destroy: it flushes once more, then fails what is left with CLOSED, each
     * call through its callback; no callback runs after it returns */
    varlog_appender_close(&app, 5000);
    varlog_client_destroy(client);

    long stored = 0, not_stored = 0, maybe = 0;
    uint64_t first = 0, last = 0;
    for (long i = 0; states && i < queued; i++) {
        if (states[i].fate == STORED) {
            stored++;
            first = first == 0 || states[i].glsn < first ? states[i].glsn : first;
            last = states[i].glsn > last ? states[i].glsn : last;
        } else if (states[i].fate == MAYBE_STORED) {
            maybe++;
        } else {
            not_stored++;
        }
    }
    free(states);
    printf("producer: %ld records stored in topic %d (GLSN %llu..%llu), %ld not stored, %ld "
           "perhaps stored, %ld not queued\n",
           stored, topic, (unsigned long long)first, (unsigned long long)last, not_stored, maybe,
           count - queued);
    return status == 0 && stored == count ? 0 : 1;
}
