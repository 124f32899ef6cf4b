/* test_bad_input's rows of subscriptions, peek and trim (bad_input_client.h). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "bad_input_client.h"

static void on_entry(const varlog_entry_t *entry, void *opaque)
{
    (void)entry, (void)opaque;
}

const varlog_subscribe_handlers_t bi_handlers = {.on_entry = on_entry};
static const varlog_subscribe_handlers_t no_on_entry = {.on_entry = NULL};

/* ---- subscriptions ------------------------------------------------------------------------- */

typedef enum { SUB, SUB_ITER, SUB_TO, SUB_TO_ITER } sub_form_t;

/* A subscribe call of any form (ls is for the _to forms), which on a failure with a client and
 * out given must leave *out NULL; one that succeeds is closed at once. */
static varlog_err_t subscribe(sub_form_t form, varlog_client_t *c, int32_t topic, int32_t ls,
                              uint64_t begin, uint64_t end, const varlog_subscribe_handlers_t *h,
                              bool with_out)
{
    varlog_subscription_t *sub = (varlog_subscription_t *)(uintptr_t)1;
    varlog_subscription_t **out = with_out ? &sub : NULL;
    varlog_err_t rc = form == SUB        ? varlog_subscribe(c, topic, begin, end, h, out)
                      : form == SUB_ITER ? varlog_subscribe_iter(c, topic, begin, end, out)
                      : form == SUB_TO   ? varlog_subscribe_to(c, topic, ls, begin, end, h, out)
                                         : varlog_subscribe_to_iter(c, topic, ls, begin, end, out);
    if (rc == VARLOG_OK) {
        varlog_subscription_close(&sub);
        return sub ? bi_broken("*sub not NULL after close") : rc;
    }
    return !c || !with_out || !sub ? rc : bi_broken("*out not NULL after a failure");
}

#define GLSN VARLOG_GLSN_MAX
CALL(sub_null_client, subscribe(SUB, NULL, 1, 0, 1, GLSN, &bi_handlers, true))
CALL(sub_null_out, subscribe(SUB, e->f.client, 1, 0, 1, GLSN, &bi_handlers, false))
CALL(sub_null_handlers, subscribe(SUB, e->f.client, 1, 0, 1, GLSN, NULL, true))
CALL(sub_null_on_entry, subscribe(SUB, e->f.client, 1, 0, 1, GLSN, &no_on_entry, true))
CALL(sub_topic_0, subscribe(SUB, e->f.client, 0, 0, 1, GLSN, &bi_handlers, true))
CALL(sub_empty_range, subscribe(SUB, e->f.client, 1, 0, 5, 5, &bi_handlers, true))
CALL(sub_reversed_range, subscribe(SUB, e->f.client, 1, 0, GLSN, 0, &bi_handlers, true))
CALL(sub_unknown_topic, subscribe(SUB, e->f.client, 99, 0, 1, GLSN, &bi_handlers, true))
CALL(sub_begin_0, subscribe(SUB, e->f.client, 1, 0, 0, 1, &bi_handlers, true))
CALL(subi_null_client, subscribe(SUB_ITER, NULL, 1, 0, 1, GLSN, NULL, true))
CALL(subi_null_out, subscribe(SUB_ITER, e->f.client, 1, 0, 1, GLSN, NULL, false))
CALL(subi_topic_neg, subscribe(SUB_ITER, e->f.client, -1, 0, 1, GLSN, NULL, true))
CALL(subi_empty_range, subscribe(SUB_ITER, e->f.client, 1, 0, 0, 0, NULL, true))
CALL(subi_unknown_topic, subscribe(SUB_ITER, e->f.client, 99, 0, 1, GLSN, NULL, true))
CALL(subto_null_handlers, subscribe(SUB_TO, e->f.client, 1, 1, 1, GLSN, NULL, true))
CALL(subto_ls_0, subscribe(SUB_TO, e->f.client, 1, 0, 1, GLSN, &bi_handlers, true))
CALL(subto_ls_neg, subscribe(SUB_TO, e->f.client, 1, INT32_MIN, 1, GLSN, &bi_handlers, true))
CALL(subto_unknown_ls, subscribe(SUB_TO, e->f.client, 1, 99, 1, GLSN, &bi_handlers, true))
CALL(subto_other_topic, subscribe(SUB_TO, e->f.client, 1, 3, 1, GLSN, &bi_handlers, true))
CALL(subto_empty_range, subscribe(SUB_TO, e->f.client, 1, 1, 9, 3, &bi_handlers, true))
CALL(subtoi_null_out, subscribe(SUB_TO_ITER, e->f.client, 1, 1, 1, GLSN, NULL, false))
CALL(subtoi_ls_0, subscribe(SUB_TO_ITER, e->f.client, 1, 0, 1, GLSN, NULL, true))
CALL(subtoi_unknown_ls, subscribe(SUB_TO_ITER, e->f.client, 1, 99, 1, GLSN, NULL, true))
CALL(subtoi_unknown_topic, subscribe(SUB_TO_ITER, e->f.client, 99, 1, 1, GLSN, NULL, true))

ROW(next_null_sub)
{
    (void)e;
    varlog_entry_t entry;
    return varlog_subscription_next(NULL, 0, &entry);
}
CALL(next_null_entry, varlog_subscription_next(e->iter, 0, NULL))
ROW(next_handler_form)
{
    varlog_entry_t entry;
    return varlog_subscription_next(e->hsub, 0, &entry);
}
ROW(next_nothing_yet)
{
    varlog_entry_t entry;
    return varlog_subscription_next(e->iter, 0, &entry);
}
ROW(next_below)
{
    varlog_entry_t entry;
    return varlog_subscription_next(e->iter, -2, &entry);
}
ROW(sub_stats_null)
{
    varlog_subscription_stats_t st;
    varlog_err_t rc = varlog_subscription_stats(NULL, &st);
    return rc == varlog_subscription_stats(e->iter, NULL) ? rc
                                                          : bi_broken("NULL out answered apart");
}
ROW(sub_health_null)
{
    varlog_subscription_health_t h;
    varlog_err_t rc = varlog_subscription_health(NULL, &h);
    return rc == varlog_subscription_health(e->iter, NULL) ? rc
                                                           : bi_broken("NULL out answered apart");
}
ROW(sub_close_null)
{
    (void)e;
    varlog_subscription_t *sub = NULL;
    varlog_subscription_close(NULL);
    varlog_subscription_close(&sub);
    return VARLOG_OK;
}
ROW(sub_close_twice)
{
    varlog_subscription_t *sub = NULL;
    varlog_err_t rc = varlog_subscribe_iter(e->f.client, TOPIC_READ, 1, GLSN, &sub);
    if (rc != VARLOG_OK)
        return rc;
    varlog_subscription_close(&sub);
    if (sub)
        return bi_broken("*sub not NULL after close");
    varlog_subscription_close(&sub);
    return VARLOG_OK;
}

/* ---- peek and trim ------------------------------------------------------------------------- */

static varlog_err_t peek(varlog_client_t *c, int32_t topic, int32_t ls, int64_t timeout_ms,
                         bool with_first, bool with_last)
{
    varlog_entry_meta_t first = {.glsn = 77}, last = {.glsn = 77};
    varlog_err_t rc = varlog_peek(c, topic, ls, timeout_ms, with_first ? &first : NULL,
                                  with_last ? &last : NULL, NULL);
    if (rc != VARLOG_OK && (first.glsn != 77 || last.glsn != 77))
        return bi_broken("first or last written on failure");
    return rc;
}

CALL(peek_null_client, peek(NULL, 1, 1, 1000, true, true))
CALL(peek_null_first, peek(e->f.client, 1, 1, 1000, false, true))
CALL(peek_null_last, peek(e->f.client, 1, 1, 1000, true, false))
CALL(peek_topic_0, peek(e->f.client, 0, 1, 1000, true, true))
CALL(peek_ls_0, peek(e->f.client, 1, 0, 1000, true, true))
CALL(peek_timeout_0, peek(e->f.client, 1, 1, 0, true, true))
CALL(peek_timeout_below, peek(e->f.client, 1, 1, -2, true, true))
CALL(peek_unknown_topic, peek(e->f.client, 99, 1, 5000, true, true))
CALL(peek_unknown_ls, peek(e->f.client, 1, 99, 5000, true, true))
CALL(peek_other_topic, peek(e->f.client, 1, 3, 5000, true, true))
CALL(peek_timeout_huge, peek(e->f.client, 1, 1, INT64_MAX, true, true))
CALL(trim_null_client, varlog_trim(NULL, 1, 1, 1000))
CALL(trim_topic_0, varlog_trim(e->f.client, 0, 1, 1000))
CALL(trim_until_0, varlog_trim(e->f.client, 1, 0, 1000))
CALL(trim_until_max, varlog_trim(e->f.client, 1, VARLOG_GLSN_MAX, 1000))
CALL(trim_timeout_0, varlog_trim(e->f.client, 1, 1, 0))
CALL(trim_timeout_below, varlog_trim(e->f.client, 1, 1, -2))
CALL(trim_unknown_topic, varlog_trim(e->f.client, 99, 1, 5000))
CALL(trim_timeout_huge, varlog_trim(e->f.client, 1, 1, INT64_MAX))

/* ---- while the client closes, and once it is gone ----------------------------------------- */

CALL(closing_sub, subscribe(SUB, e->f.client, 1, 0, 1, GLSN, &bi_handlers, true))
CALL(closing_subi, subscribe(SUB_ITER, e->f.client, 1, 0, 1, GLSN, NULL, true))
CALL(closing_subto, subscribe(SUB_TO, e->f.client, 1, 1, 1, GLSN, &bi_handlers, true))
CALL(closing_subtoi, subscribe(SUB_TO_ITER, e->f.client, 1, 1, 1, GLSN, NULL, true))
CALL(closing_peek, peek(e->f.client, 1, 1, 1000, true, true))
CALL(closing_trim, varlog_trim(e->f.client, 1, 1, 1000))
CALL(after_next_iter, next_nothing_yet(e))
CALL(after_next_handler, next_handler_form(e))
ROW(after_sub_stats)
{
    varlog_subscription_stats_t st;
    return varlog_subscription_stats(e->iter, &st);
}
ROW(after_sub_health)
{
    varlog_subscription_health_t h;
    return varlog_subscription_health(e->iter, &h);
}
/* Frees what the client's destroy left (the valgrind copy sees a leak otherwise), twice. */
ROW(after_sub_close)
{
    varlog_subscription_close(&e->iter);
    varlog_subscription_close(&e->hsub);
    varlog_subscription_close(&e->iter);
    return e->iter || e->hsub ? bi_broken("*sub not NULL after close") : VARLOG_OK;
}
static const bi_row_t read_rows[] = {
    R(varlog_subscribe, "NULL client", INVAL, "client is NULL", sub_null_client),
    R(varlog_subscribe_iter, "NULL client", INVAL, "client is NULL", subi_null_client),
    R(varlog_subscription_next, "NULL", INVAL, "sub is NULL", next_null_sub),
    R(varlog_subscription_close, "NULL and *sub NULL", OK, OK, sub_close_null),
    R(varlog_peek, "NULL client", INVAL, "client is NULL", peek_null_client),
    R(varlog_trim, "NULL client", INVAL, "client is NULL", trim_null_client),
    R(varlog_subscribe, "NULL out", INVAL, "out is NULL", sub_null_out),
    R(varlog_subscribe, "NULL handlers", INVAL, "handlers is NULL", sub_null_handlers),
    R(varlog_subscribe, "NULL on_entry", INVAL, "on_entry is NULL", sub_null_on_entry),
    R(varlog_subscribe, "topic 0", INVAL, "topic id 0", sub_topic_0),
    R(varlog_subscribe, "begin = end", INVAL, "empty range", sub_empty_range),
    R(varlog_subscribe, "begin > end", INVAL, "empty range", sub_reversed_range),
    R(varlog_subscribe, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99", sub_unknown_topic),
    R(varlog_subscribe, "[0, 1)", OK, OK, sub_begin_0),
    R(varlog_subscribe_iter, "NULL out", INVAL, "out is NULL", subi_null_out),
    R(varlog_subscribe_iter, "topic -1", INVAL, "topic id -1", subi_topic_neg),
    R(varlog_subscribe_iter, "[0, 0)", INVAL, "empty range", subi_empty_range),
    R(varlog_subscribe_iter, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99",
      subi_unknown_topic),
    R(varlog_subscribe_to, "NULL handlers", INVAL, "handlers is NULL", subto_null_handlers),
    R(varlog_subscribe_to, "log stream 0", INVAL, "log stream id 0", subto_ls_0),
    R(varlog_subscribe_to, "log stream INT32_MIN", INVAL, "log stream id -2147483648",
      subto_ls_neg),
    R(varlog_subscribe_to, "unknown log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM, "no log stream 99",
      subto_unknown_ls),
    R(varlog_subscribe_to, "another topic's log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "no log stream 3", subto_other_topic),
    R(varlog_subscribe_to, "begin > end", INVAL, "empty range", subto_empty_range),
    R(varlog_subscribe_to_iter, "NULL out", INVAL, "out is NULL", subtoi_null_out),
    R(varlog_subscribe_to_iter, "log stream 0", INVAL, "log stream id 0", subtoi_ls_0),
    R(varlog_subscribe_to_iter, "unknown log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "no log stream 99", subtoi_unknown_ls),
    R(varlog_subscribe_to_iter, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99",
      subtoi_unknown_topic),
    R(varlog_subscription_next, "NULL entry", INVAL, "entry is NULL", next_null_entry),
    R(varlog_subscription_next, "a handler-form subscription", VARLOG_ERR_STATE, "handlers",
      next_handler_form),
    R(varlog_subscription_next, "timeout 0, nothing buffered", VARLOG_ERR_TIMED_OUT,
      "no entry within 0 ms", next_nothing_yet),
    R(varlog_subscription_next, "timeout -2", INVAL, "timeout_ms -2", next_below),
    R(varlog_subscription_stats, "NULL sub, NULL out", INVAL, "is NULL", sub_stats_null),
    R(varlog_subscription_health, "NULL sub, NULL out", INVAL, "is NULL", sub_health_null),
    R(varlog_subscription_close, "twice", OK, OK, sub_close_twice),
    R(varlog_peek, "NULL first", INVAL, "first is NULL", peek_null_first),
    R(varlog_peek, "NULL last", INVAL, "last is NULL", peek_null_last),
    R(varlog_peek, "topic 0", INVAL, "topic id 0", peek_topic_0),
    R(varlog_peek, "log stream 0", INVAL, "log stream id 0", peek_ls_0),
    R(varlog_peek, "timeout 0", INVAL, "timeout_ms 0", peek_timeout_0),
    R(varlog_peek, "timeout -2", INVAL, "timeout_ms -2", peek_timeout_below),
    R(varlog_peek, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99", peek_unknown_topic),
    R(varlog_peek, "unknown log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM, "no log stream 99",
      peek_unknown_ls),
    R(varlog_peek, "another topic's log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM, "no log stream 3",
      peek_other_topic),
    R(varlog_peek, "timeout INT64_MAX", OK, OK, peek_timeout_huge),
    R(varlog_trim, "topic 0", INVAL, "topic id 0", trim_topic_0),
    R(varlog_trim, "until 0", INVAL, "until_glsn 0", trim_until_0),
    R(varlog_trim, "until VARLOG_GLSN_MAX", INVAL, "until_glsn 18446744073709551615",
      trim_until_max),
    R(varlog_trim, "timeout 0", INVAL, "timeout_ms 0", trim_timeout_0),
    R(varlog_trim, "timeout -2", INVAL, "timeout_ms -2", trim_timeout_below),
    R(varlog_trim, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99", trim_unknown_topic),
    R(varlog_trim, "timeout INT64_MAX", OK, OK, trim_timeout_huge),
};
const bi_table_t bi_read_rows = {read_rows, sizeof(read_rows) / sizeof(read_rows[0])};

static const bi_row_t read_closing_rows[] = {
    R(varlog_subscribe, "client closing", CLOSED, "closing", closing_sub),
    R(varlog_subscribe_iter, "client closing", CLOSED, "closing", closing_subi),
    R(varlog_subscribe_to, "client closing", CLOSED, "closing", closing_subto),
    R(varlog_subscribe_to_iter, "client closing", CLOSED, "closing", closing_subtoi),
    R(varlog_peek, "client closing", CLOSED, "closing", closing_peek),
    R(varlog_trim, "client closing", CLOSED, "closing", closing_trim),
};
const bi_table_t bi_read_closing_rows = {read_closing_rows,
                                         sizeof(read_closing_rows) / sizeof(read_closing_rows[0])};

static const bi_row_t read_after_rows[] = {
    R(varlog_subscription_next, "client destroyed", CLOSED, "closed", after_next_iter),
    R(varlog_subscription_next, "client destroyed, handler form", VARLOG_ERR_STATE, "handlers",
      after_next_handler),
    R(varlog_subscription_stats, "client destroyed", OK, OK, after_sub_stats),
    R(varlog_subscription_health, "client destroyed", OK, OK, after_sub_health),
    R(varlog_subscription_close, "client destroyed, then twice", OK, OK, after_sub_close),
};
const bi_table_t bi_read_after_rows = {read_after_rows,
                                       sizeof(read_after_rows) / sizeof(read_after_rows[0])};
