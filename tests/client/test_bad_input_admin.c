/* Bad input, table-driven (issue 19, section 5), for the admin handle (varlog/admin.h) and the
 * embedded server (varlog/server.h): NULL, zero, oversized, unknown and out-of-range
 * arguments, and a handle destroyed under a call. This file has the admin's rows and the
 * tests, bad_input_server.c the server's (bad_input_admin.h); the table and its runner are
 * bad_input.h's, the client's headers test_bad_input.c's. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bad_input_admin.h"
#include "test_support.h"

static char long_address[4096];

/* ---- the admin handle ---------------------------------------------------------------------- */

CALL(topic_status, bi_expect_str("99", varlog_topic_status_name((varlog_topic_status_t)99), "?"))
CALL(ls_status,
     bi_expect_str("-1", varlog_log_stream_status_name((varlog_log_stream_status_t)-1), "?"))
CALL(sn_status,
     bi_expect_str("2", varlog_storage_node_status_name((varlog_storage_node_status_t)2), "?"))

/* varlog_admin_new, which on failure must set *out to NULL and give errstr the last error;
 * a handle it opens is destroyed at once. */
static varlog_err_t admin_new(const char *address, bool with_out)
{
    varlog_admin_t *a = (varlog_admin_t *)(uintptr_t)1;
    char errstr[256] = "";
    varlog_err_t rc = varlog_admin_new(address, NULL, with_out ? &a : NULL, errstr, sizeof(errstr));
    if (rc == VARLOG_OK) {
        bool same = strcmp(varlog_admin_address(a), address) == 0;
        varlog_admin_destroy(a);
        return same ? rc : bi_broken("varlog_admin_address is not the address given");
    }
    if (with_out && a)
        return bi_broken("*out not NULL after a failure");
    if (strncmp(errstr, varlog_last_error(), strlen(errstr)) != 0)
        return bi_broken("errstr \"%s\" is not the last error", errstr);
    return rc;
}

CALL(admin_new_null_address, admin_new(NULL, true))
CALL(admin_new_null_out, admin_new("127.0.0.1:1", false))
CALL(admin_new_empty, admin_new("", true))
CALL(admin_new_space, admin_new("127.0.0.1 :1", true))
CALL(admin_new_list, admin_new("127.0.0.1:1,127.0.0.1:2", true))
CALL(admin_new_tab, admin_new("127.0.0.1:1\t", true))
CALL(admin_new_long, admin_new(long_address, true))
ROW(admin_destroy_null)
{
    (void)e;
    varlog_admin_destroy(NULL);
    return VARLOG_OK;
}
CALL(admin_address_null, bi_expect_str("address of NULL", varlog_admin_address(NULL), ""))

/* A first call on a handle for a 4 KiB host name: the resolver refuses it, and the call must
 * answer as for any address that does not answer, within its timeout. */
ROW(admin_long_host)
{
    (void)e;
    varlog_admin_t *a = NULL;
    varlog_err_t rc = varlog_admin_new(long_address, NULL, &a, NULL, 0);
    if (rc != VARLOG_OK)
        return bi_broken("varlog_admin_new: %s", varlog_err_name(rc));
    int32_t id = -7;
    rc = varlog_admin_add_topic(a, 2000, &id);
    varlog_admin_destroy(a);
    return id == -7 ? rc : bi_broken("*topic_id written on failure");
}

CALL(add_topic_null_admin, varlog_admin_add_topic(NULL, 1000, NULL))
CALL(add_topic_null_id, varlog_admin_add_topic(e->admin, 1000, NULL))
ROW(add_topic_timeout_0)
{
    int32_t id = -7;
    varlog_err_t rc = varlog_admin_add_topic(e->admin, 0, &id);
    return id == -7 ? rc : bi_broken("*topic_id written on failure");
}
ROW(add_topic_timeout_below)
{
    int32_t id;
    return varlog_admin_add_topic(e->admin, -2, &id);
}
ROW(add_topic_timeout_min)
{
    int32_t id;
    return varlog_admin_add_topic(e->admin, INT64_MIN, &id);
}
ROW(add_topic_timeout_huge)
{
    int32_t id;
    return varlog_admin_add_topic(e->admin, INT64_MAX, &id);
}

/* A describe call, which on failure must leave *out as it was. */
static varlog_err_t get_topic(varlog_admin_t *a, int32_t topic, int64_t timeout_ms, bool with_out)
{
    varlog_topic_info_t out = {.topic_id = -7};
    varlog_err_t rc = varlog_admin_get_topic(a, topic, timeout_ms, with_out ? &out : NULL);
    return rc == VARLOG_OK || out.topic_id == -7 ? rc : bi_broken("*out written on failure");
}

CALL(get_topic_null_admin, get_topic(NULL, 1, 1000, true))
CALL(get_topic_0, get_topic(e->admin, 0, 1000, true))
CALL(get_topic_min, get_topic(e->admin, INT32_MIN, 1000, true))
CALL(get_topic_null_out, get_topic(e->admin, 1, 1000, false))
CALL(get_topic_timeout_0, get_topic(e->admin, 1, 0, true))
CALL(get_topic_unknown, get_topic(e->admin, 99, 5000, true))
CALL(get_topic_huge, get_topic(e->admin, 1, INT64_MAX, true))

/* A list call of the admin, which on failure must leave *n_total and out as they were, and
 * never write past cap. */
typedef enum { L_TOPICS, L_LOG_STREAMS, L_STORAGE_NODES, L_MR_NODES, L_MR_MEMBERS } list_kind_t;

static varlog_err_t admin_list(list_kind_t kind, varlog_admin_t *a, int32_t topic,
                               int64_t timeout_ms, bool with_out, size_t cap, bool with_n)
{
    static _Thread_local union {
        varlog_topic_info_t t[2];
        varlog_log_stream_info_t l[2];
        varlog_storage_node_info_t s[2];
        varlog_mr_node_info_t m[2];
        varlog_mr_member_t p[2];
    } out;
    memset(&out, 0x5a, sizeof(out));
    unsigned char fresh[sizeof(out)];
    memcpy(fresh, &out, sizeof(out));
    size_t n = 77, *np = with_n ? &n : NULL;
    void *o = with_out ? &out : NULL;
    varlog_err_t rc =
        kind == L_TOPICS          ? varlog_admin_list_topics(a, timeout_ms, o, cap, np)
        : kind == L_LOG_STREAMS   ? varlog_admin_list_log_streams(a, topic, timeout_ms, o, cap, np)
        : kind == L_STORAGE_NODES ? varlog_admin_list_storage_nodes(a, timeout_ms, o, cap, np)
        : kind == L_MR_NODES      ? varlog_admin_list_mr_nodes(a, timeout_ms, o, cap, np)
                             : varlog_admin_get_mr_members(a, timeout_ms, NULL, NULL, o, cap, np);
    if (rc != VARLOG_OK && (n != 77 || memcmp(fresh, &out, sizeof(out)) != 0))
        return bi_broken("out or *n_total written on failure");
    size_t size = kind == L_TOPICS          ? sizeof(out.t[0])
                  : kind == L_LOG_STREAMS   ? sizeof(out.l[0])
                  : kind == L_STORAGE_NODES ? sizeof(out.s[0])
                  : kind == L_MR_NODES      ? sizeof(out.m[0])
                                            : sizeof(out.p[0]);
    if (rc == VARLOG_OK && cap < 2 && memcmp(fresh + size, (char *)&out + size, size) != 0)
        return bi_broken("element 1 written with cap %zu", cap);
    return rc;
}

CALL(list_topics_null_admin, admin_list(L_TOPICS, NULL, 0, 1000, true, 2, true))
CALL(list_topics_null_n, admin_list(L_TOPICS, e->admin, 0, 1000, true, 2, false))
CALL(list_topics_null_out, admin_list(L_TOPICS, e->admin, 0, 1000, false, 1, true))
CALL(list_topics_cap_0, admin_list(L_TOPICS, e->admin, 0, 1000, false, 0, true))
CALL(list_topics_cap_1, admin_list(L_TOPICS, e->admin, 0, 1000, true, 1, true))
CALL(list_topics_timeout_below, admin_list(L_TOPICS, e->admin, 0, -2, true, 2, true))
CALL(unregister_null_admin, varlog_admin_unregister_topic(NULL, 1, 1000))
CALL(unregister_0, varlog_admin_unregister_topic(e->admin, 0, 1000))
CALL(unregister_unknown, varlog_admin_unregister_topic(e->admin, 99, 5000))
CALL(unregister_timeout_0, varlog_admin_unregister_topic(e->admin, 1, 0))

static varlog_err_t add_ls(varlog_admin_t *a, int32_t topic, int64_t timeout_ms, bool with_out)
{
    varlog_log_stream_info_t out = {.log_stream_id = -7};
    varlog_err_t rc = varlog_admin_add_log_stream(a, topic, timeout_ms, with_out ? &out : NULL);
    return rc == VARLOG_OK || out.log_stream_id == -7 ? rc : bi_broken("*out written on failure");
}

CALL(add_ls_null_admin, add_ls(NULL, 1, 1000, true))
CALL(add_ls_topic_0, add_ls(e->admin, 0, 1000, true))
CALL(add_ls_null_out, add_ls(e->admin, 1, 1000, false))
CALL(add_ls_unknown, add_ls(e->admin, 99, 5000, true))
CALL(add_ls_timeout_below, add_ls(e->admin, 1, -5, true))

static varlog_err_t get_ls(varlog_admin_t *a, int32_t topic, int32_t ls, int64_t timeout_ms,
                           bool with_out)
{
    varlog_log_stream_info_t out = {.log_stream_id = -7};
    varlog_err_t rc = varlog_admin_get_log_stream(a, topic, ls, timeout_ms, with_out ? &out : NULL);
    return rc == VARLOG_OK || out.log_stream_id == -7 ? rc : bi_broken("*out written on failure");
}

CALL(get_ls_null_admin, get_ls(NULL, 1, 1, 1000, true))
CALL(get_ls_topic_0, get_ls(e->admin, 0, 1, 1000, true))
CALL(get_ls_0, get_ls(e->admin, 1, 0, 1000, true))
CALL(get_ls_null_out, get_ls(e->admin, 1, 1, 1000, false))
CALL(get_ls_unknown_topic, get_ls(e->admin, 99, 1, 5000, true))
CALL(get_ls_unknown, get_ls(e->admin, 1, 99, 5000, true))
CALL(get_ls_other_topic, get_ls(e->admin, 1, 3, 5000, true))
CALL(get_ls_huge, get_ls(e->admin, 1, 1, INT64_MAX, true))
CALL(list_ls_null_admin, admin_list(L_LOG_STREAMS, NULL, 1, 1000, true, 2, true))
CALL(list_ls_topic_0, admin_list(L_LOG_STREAMS, e->admin, 0, 1000, true, 2, true))
CALL(list_ls_null_n, admin_list(L_LOG_STREAMS, e->admin, 1, 1000, true, 2, false))
CALL(list_ls_null_out, admin_list(L_LOG_STREAMS, e->admin, 1, 1000, false, 2, true))
CALL(list_ls_unknown, admin_list(L_LOG_STREAMS, e->admin, 99, 5000, true, 2, true))
CALL(list_ls_cap_1, admin_list(L_LOG_STREAMS, e->admin, 1, 1000, true, 1, true))

static varlog_err_t seal(varlog_admin_t *a, int32_t topic, int32_t ls, int64_t timeout_ms)
{
    uint64_t glsn = 77;
    varlog_err_t rc = varlog_admin_seal(a, topic, ls, timeout_ms, &glsn);
    return rc == VARLOG_OK || glsn == 77 ? rc : bi_broken("*sealed_glsn written on failure");
}

static varlog_err_t unseal(varlog_admin_t *a, int32_t topic, int32_t ls, int64_t timeout_ms)
{
    varlog_log_stream_info_t out = {.log_stream_id = -7};
    varlog_err_t rc = varlog_admin_unseal(a, topic, ls, timeout_ms, &out);
    return rc == VARLOG_OK || out.log_stream_id == -7 ? rc : bi_broken("*out written on failure");
}

CALL(seal_null_admin, seal(NULL, 1, 2, 1000))
CALL(seal_topic_0, seal(e->admin, 0, 2, 1000))
CALL(seal_ls_0, seal(e->admin, 1, 0, 1000))
CALL(seal_unknown_topic, seal(e->admin, 99, 2, 5000))
CALL(seal_unknown, seal(e->admin, 1, 99, 5000))
CALL(seal_other_topic, seal(e->admin, 1, 3, 5000))
CALL(seal_timeout_0, seal(e->admin, 1, 2, 0))
CALL(seal_no_glsn, varlog_admin_seal(e->admin, 1, 2, 5000, NULL))
CALL(unseal_null_admin, unseal(NULL, 1, 2, 1000))
CALL(unseal_topic_neg, unseal(e->admin, -1, 2, 1000))
CALL(unseal_ls_neg, unseal(e->admin, 1, -1, 1000))
CALL(unseal_unknown_topic, unseal(e->admin, 99, 2, 5000))
CALL(unseal_unknown, unseal(e->admin, 1, 99, 5000))
CALL(unseal_other_topic, unseal(e->admin, 1, 3, 5000))
CALL(unseal_timeout_below, unseal(e->admin, 1, 2, -3))
CALL(unseal_no_out, varlog_admin_unseal(e->admin, 1, 2, 5000, NULL))
CALL(trim_null_admin, varlog_admin_trim(NULL, 1, 1, 1000))
CALL(trim_topic_0, varlog_admin_trim(e->admin, 0, 1, 1000))
CALL(trim_last_0, varlog_admin_trim(e->admin, 1, 0, 1000))
CALL(trim_last_max, varlog_admin_trim(e->admin, 1, UINT64_MAX, 1000))
CALL(trim_unknown, varlog_admin_trim(e->admin, 99, 1, 5000))
CALL(trim_timeout_0, varlog_admin_trim(e->admin, 1, 1, 0))

static varlog_err_t get_sn(varlog_admin_t *a, int32_t id, int64_t timeout_ms, bool with_out)
{
    varlog_storage_node_info_t out = {.storage_node_id = -7};
    varlog_err_t rc = varlog_admin_get_storage_node(a, id, timeout_ms, with_out ? &out : NULL);
    return rc == VARLOG_OK || out.storage_node_id == -7 ? rc : bi_broken("*out written on failure");
}

CALL(get_sn_null_admin, get_sn(NULL, 1, 1000, true))
CALL(get_sn_0, get_sn(e->admin, 0, 1000, true))
CALL(get_sn_null_out, get_sn(e->admin, 1, 1000, false))
CALL(get_sn_unknown, get_sn(e->admin, 99, 5000, true))
CALL(get_sn_timeout_0, get_sn(e->admin, 1, 0, true))
CALL(list_sn_null_admin, admin_list(L_STORAGE_NODES, NULL, 0, 1000, true, 2, true))
CALL(list_sn_null_n, admin_list(L_STORAGE_NODES, e->admin, 0, 1000, true, 2, false))
CALL(list_sn_null_out, admin_list(L_STORAGE_NODES, e->admin, 0, 1000, false, 1, true))
CALL(list_sn_cap_0, admin_list(L_STORAGE_NODES, e->admin, 0, 1000, false, 0, true))
CALL(list_mr_null_admin, admin_list(L_MR_NODES, NULL, 0, 1000, true, 2, true))
CALL(list_mr_null_n, admin_list(L_MR_NODES, e->admin, 0, 1000, true, 2, false))
CALL(list_mr_null_out, admin_list(L_MR_NODES, e->admin, 0, 1000, false, 2, true))
CALL(list_mr_timeout_0, admin_list(L_MR_NODES, e->admin, 0, 0, true, 2, true))
CALL(list_mr_cap_0, admin_list(L_MR_NODES, e->admin, 0, 1000, false, 0, true))
CALL(members_null_admin, admin_list(L_MR_MEMBERS, NULL, 0, 1000, true, 2, true))
CALL(members_null_n, admin_list(L_MR_MEMBERS, e->admin, 0, 1000, true, 2, false))
CALL(members_null_out, admin_list(L_MR_MEMBERS, e->admin, 0, 1000, false, 1, true))
CALL(members_cap_0, admin_list(L_MR_MEMBERS, e->admin, 0, 1000, false, 0, true))
CALL(members_timeout_below, admin_list(L_MR_MEMBERS, e->admin, 0, -9, true, 2, true))

/* A call in flight when its handle is destroyed: CLOSED, on the thread that made it. */
typedef struct inflight {
    varlog_admin_t *a;
    varlog_err_t rc;
    char text[512];
} inflight_t;

static void *get_topic_main(void *arg)
{
    inflight_t *c = arg;
    varlog_topic_info_t out;
    c->rc = varlog_admin_get_topic(c->a, 1, -1, &out);
    snprintf(c->text, sizeof(c->text), "%s", varlog_last_error());
    return NULL;
}

typedef struct count_wait {
    varlog_server_t *srv;
    const char *method;
    uint64_t above;
} count_wait_t;

static bool count_above(void *arg)
{
    count_wait_t *w = arg;
    return varlog_server_call_count(w->srv, w->method) > w->above;
}

static int64_t bound_ms(void)
{
    return test_under_valgrind() ? 30000 : 10000;
}

ROW(destroy_under_call)
{
    inflight_t c = {.rc = VARLOG_OK};
    if (varlog_admin_new(varlog_server_address(e->srv), NULL, &c.a, NULL, 0) != VARLOG_OK)
        return bi_broken("no admin handle");
    count_wait_t w = {e->srv, ADM("GetTopic"), varlog_server_call_count(e->srv, ADM("GetTopic"))};
    varlog_server_delay(e->srv, ADM("GetTopic"), 600000);
    pthread_t th;
    pthread_create(&th, NULL, get_topic_main, &c);
    bool held = test_wait_until(count_above, &w, bound_ms());
    varlog_admin_destroy(c.a);
    pthread_join(th, NULL);
    varlog_server_delay(e->srv, ADM("GetTopic"), 0);
    if (!held)
        return bi_broken("the call never reached the server");
    if (c.rc != VARLOG_OK && !strstr(c.text, "ERR_CLOSED"))
        return bi_broken("the call's last error \"%s\" does not say CLOSED", c.text);
    return c.rc;
}

static const bi_row_t admin_rows[] = {
    R(varlog_topic_status_name, "99", OK, OK, topic_status),
    R(varlog_log_stream_status_name, "-1", OK, OK, ls_status),
    R(varlog_storage_node_status_name, "2", OK, OK, sn_status),
    R(varlog_admin_new, "NULL address", INVAL, "must not be NULL", admin_new_null_address),
    R(varlog_admin_new, "NULL out", INVAL, "must not be NULL", admin_new_null_out),
    R(varlog_admin_new, "empty address", INVAL, "address \"\"", admin_new_empty),
    R(varlog_admin_new, "a space", INVAL, "give one admin address", admin_new_space),
    R(varlog_admin_new, "a list", INVAL, "give one admin address", admin_new_list),
    R(varlog_admin_new, "a tab", INVAL, "give one admin address", admin_new_tab),
    R(varlog_admin_new, "4 KiB address", OK, OK, admin_new_long),
    R(varlog_admin_address, "4 KiB address", OK, OK, admin_new_long),
    R(varlog_admin_destroy, "NULL", OK, OK, admin_destroy_null),
    R(varlog_admin_address, "NULL", OK, OK, admin_address_null),
    R2(varlog_admin_add_topic, "4 KiB host name", VARLOG_ERR_RPC_UNAVAILABLE, VARLOG_ERR_TIMED_OUT,
       "add topic", admin_long_host),
    R(varlog_admin_add_topic, "NULL admin", INVAL, "admin handle is NULL", add_topic_null_admin),
    R(varlog_admin_add_topic, "NULL topic_id", INVAL, "topic_id must not be NULL",
      add_topic_null_id),
    R(varlog_admin_add_topic, "timeout 0", INVAL, "timeout_ms 0", add_topic_timeout_0),
    R(varlog_admin_add_topic, "timeout -2", INVAL, "timeout_ms -2", add_topic_timeout_below),
    R(varlog_admin_add_topic, "timeout INT64_MIN", INVAL, "timeout_ms -9223372036854775808",
      add_topic_timeout_min),
    R(varlog_admin_add_topic, "timeout INT64_MAX", OK, OK, add_topic_timeout_huge),
    R(varlog_admin_get_topic, "NULL admin", INVAL, "admin handle is NULL", get_topic_null_admin),
    R(varlog_admin_get_topic, "topic 0", INVAL, "topic id 0", get_topic_0),
    R(varlog_admin_get_topic, "topic INT32_MIN", INVAL, "topic id -2147483648", get_topic_min),
    R(varlog_admin_get_topic, "NULL out", INVAL, "out must not be NULL", get_topic_null_out),
    R(varlog_admin_get_topic, "timeout 0", INVAL, "timeout_ms 0", get_topic_timeout_0),
    R(varlog_admin_get_topic, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "get topic 99",
      get_topic_unknown),
    R(varlog_admin_get_topic, "timeout INT64_MAX", OK, OK, get_topic_huge),
    R(varlog_admin_list_topics, "NULL admin", INVAL, "admin handle is NULL",
      list_topics_null_admin),
    R(varlog_admin_list_topics, "NULL n_total", INVAL, "n_total must not be NULL",
      list_topics_null_n),
    R(varlog_admin_list_topics, "NULL out, cap 1", INVAL, "nor out when cap > 0",
      list_topics_null_out),
    R(varlog_admin_list_topics, "NULL out, cap 0", OK, OK, list_topics_cap_0),
    R(varlog_admin_list_topics, "cap below the count", OK, OK, list_topics_cap_1),
    R(varlog_admin_list_topics, "timeout -2", INVAL, "timeout_ms -2", list_topics_timeout_below),
    R(varlog_admin_unregister_topic, "NULL admin", INVAL, "admin handle is NULL",
      unregister_null_admin),
    R(varlog_admin_unregister_topic, "topic 0", INVAL, "topic id 0", unregister_0),
    R(varlog_admin_unregister_topic, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC,
      "unregister topic 99", unregister_unknown),
    R(varlog_admin_unregister_topic, "timeout 0", INVAL, "timeout_ms 0", unregister_timeout_0),
    R(varlog_admin_add_log_stream, "NULL admin", INVAL, "admin handle is NULL", add_ls_null_admin),
    R(varlog_admin_add_log_stream, "topic 0", INVAL, "topic id 0", add_ls_topic_0),
    R(varlog_admin_add_log_stream, "NULL out", INVAL, "out must not be NULL", add_ls_null_out),
    R(varlog_admin_add_log_stream, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99",
      add_ls_unknown),
    R(varlog_admin_add_log_stream, "timeout -5", INVAL, "timeout_ms -5", add_ls_timeout_below),
    R(varlog_admin_get_log_stream, "NULL admin", INVAL, "admin handle is NULL", get_ls_null_admin),
    R(varlog_admin_get_log_stream, "topic 0", INVAL, "topic id 0", get_ls_topic_0),
    R(varlog_admin_get_log_stream, "log stream 0", INVAL, "log stream id 0", get_ls_0),
    R(varlog_admin_get_log_stream, "NULL out", INVAL, "out must not be NULL", get_ls_null_out),
    R(varlog_admin_get_log_stream, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "ERR_UNKNOWN_TOPIC",
      get_ls_unknown_topic),
    R(varlog_admin_get_log_stream, "unknown log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "get log stream 99 of topic 1", get_ls_unknown),
    R(varlog_admin_get_log_stream, "another topic's log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "get log stream 3 of topic 1", get_ls_other_topic),
    R(varlog_admin_get_log_stream, "timeout INT64_MAX", OK, OK, get_ls_huge),
    R(varlog_admin_list_log_streams, "NULL admin", INVAL, "admin handle is NULL",
      list_ls_null_admin),
    R(varlog_admin_list_log_streams, "topic 0", INVAL, "topic id 0", list_ls_topic_0),
    R(varlog_admin_list_log_streams, "NULL n_total", INVAL, "n_total must not be NULL",
      list_ls_null_n),
    R(varlog_admin_list_log_streams, "NULL out, cap 2", INVAL, "nor out when cap > 0",
      list_ls_null_out),
    R(varlog_admin_list_log_streams, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99",
      list_ls_unknown),
    R(varlog_admin_list_log_streams, "cap below the count", OK, OK, list_ls_cap_1),
    R(varlog_admin_seal, "NULL admin", INVAL, "admin handle is NULL", seal_null_admin),
    R(varlog_admin_seal, "topic 0", INVAL, "topic id 0", seal_topic_0),
    R(varlog_admin_seal, "log stream 0", INVAL, "log stream id 0", seal_ls_0),
    R(varlog_admin_seal, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "seal log stream 2 of topic 99",
      seal_unknown_topic),
    R(varlog_admin_seal, "unknown log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "topic 1 has no log stream 99", seal_unknown),
    R(varlog_admin_seal, "another topic's log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "topic 1 has no log stream 3", seal_other_topic),
    R(varlog_admin_seal, "timeout 0", INVAL, "timeout_ms 0", seal_timeout_0),
    R(varlog_admin_seal, "NULL sealed_glsn", OK, OK, seal_no_glsn),
    R(varlog_admin_unseal, "NULL admin", INVAL, "admin handle is NULL", unseal_null_admin),
    R(varlog_admin_unseal, "topic -1", INVAL, "topic id -1", unseal_topic_neg),
    R(varlog_admin_unseal, "log stream -1", INVAL, "log stream id -1", unseal_ls_neg),
    R(varlog_admin_unseal, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "topic 99",
      unseal_unknown_topic),
    R(varlog_admin_unseal, "unknown log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "topic 1 has no log stream 99", unseal_unknown),
    R(varlog_admin_unseal, "another topic's log stream", VARLOG_ERR_UNKNOWN_LOG_STREAM,
      "topic 1 has no log stream 3", unseal_other_topic),
    R(varlog_admin_unseal, "timeout -3", INVAL, "timeout_ms -3", unseal_timeout_below),
    R(varlog_admin_unseal, "NULL out", OK, OK, unseal_no_out),
    R(varlog_admin_trim, "NULL admin", INVAL, "admin handle is NULL", trim_null_admin),
    R(varlog_admin_trim, "topic 0", INVAL, "topic id 0", trim_topic_0),
    R(varlog_admin_trim, "last 0", INVAL, "last_glsn 0", trim_last_0),
    R(varlog_admin_trim, "last UINT64_MAX", INVAL, "last_glsn 18446744073709551615", trim_last_max),
    R(varlog_admin_trim, "unknown topic", VARLOG_ERR_UNKNOWN_TOPIC, "trim topic 99", trim_unknown),
    R(varlog_admin_trim, "timeout 0", INVAL, "timeout_ms 0", trim_timeout_0),
    R(varlog_admin_get_storage_node, "NULL admin", INVAL, "admin handle is NULL",
      get_sn_null_admin),
    R(varlog_admin_get_storage_node, "id 0", INVAL, "storage node id 0", get_sn_0),
    R(varlog_admin_get_storage_node, "NULL out", INVAL, "out must not be NULL", get_sn_null_out),
    R(varlog_admin_get_storage_node, "unknown id", NF, "get storage node 99", get_sn_unknown),
    R(varlog_admin_get_storage_node, "timeout 0", INVAL, "timeout_ms 0", get_sn_timeout_0),
    R(varlog_admin_list_storage_nodes, "NULL admin", INVAL, "admin handle is NULL",
      list_sn_null_admin),
    R(varlog_admin_list_storage_nodes, "NULL n_total", INVAL, "n_total must not be NULL",
      list_sn_null_n),
    R(varlog_admin_list_storage_nodes, "NULL out, cap 1", INVAL, "nor out when cap > 0",
      list_sn_null_out),
    R(varlog_admin_list_storage_nodes, "NULL out, cap 0", OK, OK, list_sn_cap_0),
    R(varlog_admin_list_mr_nodes, "NULL admin", INVAL, "admin handle is NULL", list_mr_null_admin),
    R(varlog_admin_list_mr_nodes, "NULL n_total", INVAL, "n_total must not be NULL",
      list_mr_null_n),
    R(varlog_admin_list_mr_nodes, "NULL out, cap 2", INVAL, "nor out when cap > 0",
      list_mr_null_out),
    R(varlog_admin_list_mr_nodes, "timeout 0", INVAL, "timeout_ms 0", list_mr_timeout_0),
    R(varlog_admin_list_mr_nodes, "NULL out, cap 0", OK, OK, list_mr_cap_0),
    R(varlog_admin_get_mr_members, "NULL admin", INVAL, "admin handle is NULL", members_null_admin),
    R(varlog_admin_get_mr_members, "NULL n_total", INVAL, "n_total must not be NULL",
      members_null_n),
    R(varlog_admin_get_mr_members, "NULL out, cap 1", INVAL, "nor out when cap > 0",
      members_null_out),
    R(varlog_admin_get_mr_members, "NULL everything optional, cap 0", OK, OK, members_cap_0),
    R(varlog_admin_get_mr_members, "timeout -9", INVAL, "timeout_ms -9", members_timeout_below),
    R(varlog_admin_destroy, "a call in flight", VARLOG_ERR_CLOSED, NOTEXT, destroy_under_call),
};

/* ---- the tests ----------------------------------------------------------------------------- */

static bi_env_t env;

static int setup(void **state)
{
    (void)state;
    varlog_server_opts_t o = {.topics = 2, .log_streams_per_topic = 2};
    if (varlog_server_start(&o, &env.srv) != VARLOG_OK)
        return -1;
    return varlog_admin_new(varlog_server_address(env.srv), NULL, &env.admin, NULL, 0) == VARLOG_OK
               ? 0
               : -1;
}

static int teardown(void **state)
{
    (void)state;
    varlog_admin_destroy(env.admin);
    varlog_server_destroy(env.srv);
    memset(&env, 0, sizeof(env));
    return 0;
}

static void test_admin_rows(void **state)
{
    (void)state;
    assert_int_equal(bi_run("admin", admin_rows, sizeof(admin_rows) / sizeof(admin_rows[0]), &env),
                     0);
}

static void test_server_rows(void **state)
{
    (void)state;
    assert_int_equal(bi_run("server", bi_server_rows.rows, bi_server_rows.n, &env), 0);
}

static void test_every_function_has_a_row(void **state)
{
    (void)state;
    const bi_table_t tables[] = {TABLE(admin_rows), bi_server_rows};
    char headers[16][512];
    size_t n_headers = bi_public_headers(VARLOG_SOURCE_DIR, true, headers, 16), missing = 0;
    assert_true(n_headers <= 16);
    for (size_t i = 0; i < n_headers; i++)
        missing += bi_uncovered(headers[i], tables, 2);
    printf("bad input: %zu rows over %zu functions of admin.h and the server's %zu headers\n",
           tables[0].n + tables[1].n, bi_count_functions(tables, 2), n_headers);
    assert_int_equal(missing, 0);
}

int main(void)
{
    memset(long_address, 'a', sizeof(long_address) - 1);
    memcpy(long_address + sizeof(long_address) - 4, ":80", 3);
    bi_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_admin_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_rows, setup, teardown),
        cmocka_unit_test(test_every_function_has_a_row),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    bi_fini();
    return failed;
}
