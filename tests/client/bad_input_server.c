/* test_bad_input_admin's rows of the embedded server (varlog/server.h). It sets no
 * varlog_last_error() (its header promises none), so its rows check the code alone. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bad_input_admin.h"

/* ---- the embedded server ------------------------------------------------------------------- */

/* varlog_server_start, which must leave *out NULL on failure; a server it starts is destroyed
 * at once. */
static varlog_err_t server_start(const char *listen, int32_t topics, int32_t ls, bool with_opts)
{
    varlog_server_opts_t o = {
        .listen_address = listen, .topics = topics, .log_streams_per_topic = ls};
    varlog_server_t *srv = (varlog_server_t *)(uintptr_t)1;
    varlog_err_t rc = varlog_server_start(with_opts ? &o : NULL, &srv);
    if (rc == VARLOG_OK)
        varlog_server_destroy(srv);
    else if (srv)
        return bi_broken("*out not NULL after a failure");
    return rc;
}

/* 127 bytes that would name port 1 but for their length. */
static const char *long_listen(void)
{
    static char listen[128];
    if (!listen[0])
        snprintf(listen, sizeof(listen), "127.0.0.1:%0117d", 1);
    return listen;
}

CALL(start_null_out, varlog_server_start(NULL, NULL))
CALL(start_null_opts, server_start(NULL, 1, 1, false))
CALL(start_topics_neg, server_start(NULL, -1, 1, true))
CALL(start_ls_neg, server_start(NULL, 1, INT32_MIN, true))
CALL(start_product, server_start(NULL, 65536, 65536, true))
CALL(start_topics_max, server_start(NULL, INT32_MAX, 0, true))
CALL(start_topics_above, server_start(NULL, VARLOG_SERVER_MAX_TOPICS + 1, 0, true))
CALL(start_ls_above, server_start(NULL, 1, VARLOG_SERVER_MAX_LOG_STREAMS + 1, true))
CALL(start_zero, server_start(NULL, 0, 0, true))
CALL(start_any_host, server_start("0.0.0.0:0", 1, 1, true))
CALL(start_localhost, server_start("localhost:0", 1, 1, true))
CALL(start_no_port, server_start("127.0.0.1:", 1, 1, true))
CALL(start_port_big, server_start("127.0.0.1:65536", 1, 1, true))
CALL(start_port_junk, server_start("127.0.0.1:80x", 1, 1, true))
CALL(start_long, server_start(long_listen(), 1, 1, true))
CALL(start_port_taken, server_start(varlog_server_address(e->srv), 1, 1, true))
CALL(address_null, bi_expect_str("address of NULL", varlog_server_address(NULL), ""))
CALL(port_null, varlog_server_port(NULL) == 0 ? VARLOG_OK : bi_broken("port of NULL not 0"))
CALL(stop_null, varlog_server_stop(NULL))
CALL(restart_null, varlog_server_restart(NULL))
ROW(stop_twice)
{
    (void)e;
    varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 1};
    varlog_server_t *srv = NULL;
    varlog_err_t rc = varlog_server_start(&o, &srv);
    if (rc != VARLOG_OK)
        return bi_broken("start: %s", varlog_err_name(rc));
    varlog_err_t first = varlog_server_stop(srv), second = varlog_server_stop(srv);
    varlog_server_destroy(srv);
    return first == VARLOG_OK ? second : bi_broken("first stop: %s", varlog_err_name(first));
}
/* Stopped, then running: both serve again on the same port. */
ROW(restart_stopped_and_running)
{
    (void)e;
    varlog_server_opts_t o = {.topics = 1, .log_streams_per_topic = 1};
    varlog_server_t *srv = NULL;
    varlog_err_t rc = varlog_server_start(&o, &srv);
    if (rc != VARLOG_OK)
        return bi_broken("start: %s", varlog_err_name(rc));
    int port = varlog_server_port(srv);
    varlog_server_stop(srv);
    rc = varlog_server_restart(srv);
    varlog_err_t again = varlog_server_restart(srv);
    int port_after = varlog_server_port(srv);
    varlog_server_destroy(srv);
    if (rc == VARLOG_OK && (again != VARLOG_OK || port_after != port))
        return bi_broken("restart while running: %s, port %d then %d", varlog_err_name(again), port,
                         port_after);
    return rc;
}
ROW(server_destroy_null)
{
    (void)e;
    varlog_server_destroy(NULL);
    varlog_server_clear_faults(NULL);
    return VARLOG_OK;
}
CALL(add_topic_null_srv, varlog_server_add_topic(NULL, NULL))
CALL(add_topic_no_id, varlog_server_add_topic(e->srv, NULL))
CALL(add_ls_null_srv, varlog_server_add_log_stream(NULL, 1, NULL))
CALL(add_ls_unknown_topic, varlog_server_add_log_stream(e->srv, 99, NULL))
CALL(srv_add_ls_topic_0, varlog_server_add_log_stream(e->srv, 0, NULL))
CALL(add_ls_no_id, varlog_server_add_log_stream(e->srv, 2, NULL))
CALL(seal_null_srv, varlog_server_seal(NULL, 1, 1))
CALL(seal_srv_unknown_topic, varlog_server_seal(e->srv, 99, 1))
CALL(seal_srv_unknown, varlog_server_seal(e->srv, 1, 99))
CALL(seal_srv_other_topic, varlog_server_seal(e->srv, 1, 3))
CALL(unseal_null_srv, varlog_server_unseal(NULL, 1, 1))
CALL(unseal_srv_unknown, varlog_server_unseal(e->srv, 1, 99))
CALL(unseal_srv_twice, varlog_server_unseal(e->srv, 1, 2) == VARLOG_OK
                           ? varlog_server_unseal(e->srv, 1, 2)
                           : bi_broken("first unseal refused"))
ROW(gauges_null)
{
    (void)e;
    if (varlog_server_applied_index(NULL) || varlog_server_stored_bytes(NULL) ||
        varlog_server_resident_bytes(NULL))
        return bi_broken("a gauge of NULL is not 0");
    return VARLOG_OK;
}
ROW(counts_bad)
{
    if (varlog_server_call_count(NULL, M_APPEND) || varlog_server_call_count(e->srv, NULL) ||
        varlog_server_call_count(e->srv, "/varlog.snpb.LogIO/Nope") ||
        varlog_server_request_count(NULL, M_APPEND) || varlog_server_request_count(e->srv, NULL) ||
        varlog_server_request_count(e->srv, ""))
        return bi_broken("a count of NULL or an unknown method is not 0");
    return VARLOG_OK;
}
CALL(fail_null_srv, varlog_server_fail_next(NULL, M_APPEND, 14, "x", 1))
CALL(fail_null_method, varlog_server_fail_next(e->srv, NULL, 14, "x", 1))
CALL(fail_unknown_method, varlog_server_fail_next(e->srv, "/varlog.snpb.LogIO/append", 14, "x", 1))
CALL(fail_code_0, varlog_server_fail_next(e->srv, M_APPEND, 0, "x", 1))
CALL(fail_code_17, varlog_server_fail_next(e->srv, M_APPEND, 17, "x", 1))
CALL(fail_n_neg, varlog_server_fail_next(e->srv, M_APPEND, 14, "x", -1))
CALL(fail_null_message, varlog_server_fail_next(e->srv, M_APPEND, 14, NULL, 0))
CALL(details_null, varlog_server_fail_next_details(e->srv, M_APPEND, 14, "x", NULL, 2, 1))
CALL(details_code, varlog_server_fail_next_details(e->srv, M_APPEND, -1, "x", NULL, 0, 1))
CALL(delay_null_srv, varlog_server_delay(NULL, M_APPEND, 1))
CALL(delay_unknown, varlog_server_delay(e->srv, "Append", 1))
CALL(delay_neg, varlog_server_delay(e->srv, M_APPEND, -1))
/* A delay of INT64_MAX ms holds the answer past any timeout: the admin call must time out. */
ROW(delay_huge)
{
    varlog_err_t rc = varlog_server_delay(e->srv, ADM("ListTopics"), INT64_MAX);
    if (rc != VARLOG_OK)
        return rc;
    size_t n = 0;
    rc = varlog_admin_list_topics(e->admin, 300, NULL, 0, &n);
    varlog_server_delay(e->srv, ADM("ListTopics"), 0);
    return rc;
}
CALL(drop_null_srv, varlog_server_drop_stream_after(NULL, M_APPEND, 1, 1))
CALL(drop_unknown, varlog_server_drop_stream_after(e->srv, "x", 1, 1))
CALL(drop_unary, varlog_server_drop_stream_after(e->srv, M_METADATA, 1, 1))
CALL(drop_clear, varlog_server_drop_stream_after(e->srv, M_APPEND, -1, 5))
CALL(dropw_null_srv, varlog_server_drop_stream_after_write(NULL, M_APPEND, 1, 1))
CALL(dropw_unknown, varlog_server_drop_stream_after_write(e->srv, "x", 1, 1))
CALL(dropw_unary, varlog_server_drop_stream_after_write(e->srv, M_METADATA, 1, 1))
CALL(dropw_subscribe,
     varlog_server_drop_stream_after_write(e->srv, "/varlog.snpb.LogIO/Subscribe", 1, 1))
CALL(dropw_clear, varlog_server_drop_stream_after_write(e->srv, M_APPEND, -1, 5))

static const bi_row_t server_rows[] = {
    R(varlog_server_start, "NULL out", INVAL, NOTEXT, start_null_out),
    R(varlog_server_start, "NULL opts", INVAL, NOTEXT, start_null_opts),
    R(varlog_server_start, "topics -1", INVAL, NOTEXT, start_topics_neg),
    R(varlog_server_start, "log streams INT32_MIN", INVAL, NOTEXT, start_ls_neg),
    R(varlog_server_start, "2^32 log streams", INVAL, NOTEXT, start_product),
    R(varlog_server_start, "INT32_MAX topics", INVAL, NOTEXT, start_topics_max),
    R(varlog_server_start, "VARLOG_SERVER_MAX_TOPICS + 1", INVAL, NOTEXT, start_topics_above),
    R(varlog_server_start, "VARLOG_SERVER_MAX_LOG_STREAMS + 1", INVAL, NOTEXT, start_ls_above),
    R(varlog_server_start, "no topic", OK, OK, start_zero),
    R(varlog_server_start, "0.0.0.0", INVAL, NOTEXT, start_any_host),
    R(varlog_server_start, "localhost", INVAL, NOTEXT, start_localhost),
    R(varlog_server_start, "no port", INVAL, NOTEXT, start_no_port),
    R(varlog_server_start, "port 65536", INVAL, NOTEXT, start_port_big),
    R(varlog_server_start, "port 80x", INVAL, NOTEXT, start_port_junk),
    R(varlog_server_start, "127 bytes of address", INVAL, NOTEXT, start_long),
    R(varlog_server_start, "a port in use", VARLOG_ERR_RPC_UNAVAILABLE, NOTEXT, start_port_taken),
    R(varlog_server_address, "NULL", OK, OK, address_null),
    R(varlog_server_port, "NULL", OK, OK, port_null),
    R(varlog_server_stop, "NULL", INVAL, NOTEXT, stop_null),
    R(varlog_server_stop, "twice", VARLOG_ERR_STATE, NOTEXT, stop_twice),
    R(varlog_server_restart, "NULL", INVAL, NOTEXT, restart_null),
    R(varlog_server_restart, "stopped, then running", OK, OK, restart_stopped_and_running),
    R(varlog_server_destroy, "NULL", OK, OK, server_destroy_null),
    R(varlog_server_clear_faults, "NULL", OK, OK, server_destroy_null),
    R(varlog_server_add_topic, "NULL", INVAL, NOTEXT, add_topic_null_srv),
    R(varlog_server_add_topic, "NULL topic_id", OK, OK, add_topic_no_id),
    R(varlog_server_add_log_stream, "NULL", INVAL, NOTEXT, add_ls_null_srv),
    R(varlog_server_add_log_stream, "unknown topic", NF, NOTEXT, add_ls_unknown_topic),
    R(varlog_server_add_log_stream, "topic 0", NF, NOTEXT, srv_add_ls_topic_0),
    R(varlog_server_add_log_stream, "NULL log_stream_id", OK, OK, add_ls_no_id),
    R(varlog_server_seal, "NULL", INVAL, NOTEXT, seal_null_srv),
    R(varlog_server_seal, "unknown topic", NF, NOTEXT, seal_srv_unknown_topic),
    R(varlog_server_seal, "unknown log stream", NF, NOTEXT, seal_srv_unknown),
    R(varlog_server_seal, "another topic's log stream", NF, NOTEXT, seal_srv_other_topic),
    R(varlog_server_unseal, "NULL", INVAL, NOTEXT, unseal_null_srv),
    R(varlog_server_unseal, "unknown log stream", NF, NOTEXT, unseal_srv_unknown),
    R(varlog_server_unseal, "twice", OK, OK, unseal_srv_twice),
    R(varlog_server_applied_index, "NULL", OK, OK, gauges_null),
    R(varlog_server_stored_bytes, "NULL", OK, OK, gauges_null),
    R(varlog_server_resident_bytes, "NULL", OK, OK, gauges_null),
    R(varlog_server_call_count, "NULL, unknown method", OK, OK, counts_bad),
    R(varlog_server_request_count, "NULL, unknown method", OK, OK, counts_bad),
    R(varlog_server_fail_next, "NULL", INVAL, NOTEXT, fail_null_srv),
    R(varlog_server_fail_next, "NULL method", INVAL, NOTEXT, fail_null_method),
    R(varlog_server_fail_next, "method in another case", INVAL, NOTEXT, fail_unknown_method),
    R(varlog_server_fail_next, "code 0", INVAL, NOTEXT, fail_code_0),
    R(varlog_server_fail_next, "code 17", INVAL, NOTEXT, fail_code_17),
    R(varlog_server_fail_next, "n -1", INVAL, NOTEXT, fail_n_neg),
    R(varlog_server_fail_next, "NULL message, n 0", OK, OK, fail_null_message),
    R(varlog_server_fail_next_details, "NULL details, 2 of them", INVAL, NOTEXT, details_null),
    R(varlog_server_fail_next_details, "code -1", INVAL, NOTEXT, details_code),
    R(varlog_server_delay, "NULL", INVAL, NOTEXT, delay_null_srv),
    R(varlog_server_delay, "a method without its path", INVAL, NOTEXT, delay_unknown),
    R(varlog_server_delay, "-1 ms", INVAL, NOTEXT, delay_neg),
    R(varlog_server_delay, "INT64_MAX ms, then a call", VARLOG_ERR_TIMED_OUT, "no answer within",
      delay_huge),
    R(varlog_server_drop_stream_after, "NULL", INVAL, NOTEXT, drop_null_srv),
    R(varlog_server_drop_stream_after, "unknown method", INVAL, NOTEXT, drop_unknown),
    R(varlog_server_drop_stream_after, "a unary method", INVAL, NOTEXT, drop_unary),
    R(varlog_server_drop_stream_after, "k -1 clears", OK, OK, drop_clear),
    R(varlog_server_drop_stream_after_write, "NULL", INVAL, NOTEXT, dropw_null_srv),
    R(varlog_server_drop_stream_after_write, "unknown method", INVAL, NOTEXT, dropw_unknown),
    R(varlog_server_drop_stream_after_write, "a unary method", INVAL, NOTEXT, dropw_unary),
    R(varlog_server_drop_stream_after_write, "Subscribe (no write)", INVAL, NOTEXT,
      dropw_subscribe),
    R(varlog_server_drop_stream_after_write, "k -1 clears", OK, OK, dropw_clear),
};
const bi_table_t bi_server_rows = {server_rows, sizeof(server_rows) / sizeof(server_rows[0])};
