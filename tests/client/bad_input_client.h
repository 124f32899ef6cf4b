#ifndef VARLOG_BAD_INPUT_CLIENT_H
#define VARLOG_BAD_INPUT_CLIENT_H

/* What the files of test_bad_input share: the state its rows run against (an embedded
 * server, a client with small limits, an appender and two subscriptions), the macros that
 * write a row, and the tables of bad_input_conf.c and bad_input_read.c. */
#include "bad_input.h"
#include "client_fixture.h"
#include "varlog/varlog.h"

/* Limits small enough that rows can pass them with a few bytes (the cross-property rules of
 * conf.c hold: each batch bound within its call and queue bounds). */
#define REC_MAX 1024        /* append.record.max.bytes */
#define CALL_MAX_RECORDS 8  /* append.batch.max.records */
#define CALL_MAX_BYTES 4096 /* append.batch.max.bytes */
#define APP_MAX_RECORDS 4   /* appender.batch.max.records = appender.queue.max.records */
#define APP_MAX_BYTES 2048  /* appender.batch.max.bytes */
#define TOPIC_READ 2        /* the subscriptions' topic: nothing is appended to it */

/* A server of 2 topics (log streams 1, 2 and 3, 4) and a client with the limits above. */
struct bi_env {
    client_fixture_t f;
    varlog_appender_t *app;      /* topic 1, topic-wide */
    varlog_appender_t *self;     /* the appender whose callback runs the rows */
    varlog_subscription_t *iter; /* TOPIC_READ, iterator form */
    varlog_subscription_t *hsub; /* TOPIC_READ, handler form */
    char dead_address[64];       /* where nothing listens */
};

/* bad_input_conf.c: names, errors, the version, the configuration and opening a client; the
 * first without any handle, the second with the env (its server, a dead address). */
extern const bi_table_t bi_conf_rows, bi_conf_open_rows;

/* bad_input_read.c: subscriptions, peek and trim, with the client open, while it closes (in
 * an append callback during its destroy) and once it is gone. */
extern const bi_table_t bi_read_rows, bi_read_closing_rows, bi_read_after_rows;

/* The handlers of the env's handler-form subscription and of the rows' (on_entry only). */
extern const varlog_subscribe_handlers_t bi_handlers;

#endif
