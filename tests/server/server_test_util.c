#include "server_test_util.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "google/protobuf/empty.pb-c.h"

static void fixture_start_opts(srv_fixture_t *f, const varlog_server_opts_t *o)
{
    memset(f, 0, sizeof(*f));
    assert_int_equal(varlog_server_start(o, &f->srv), VARLOG_OK);
    f->addr = varlog_server_address(f->srv);
    assert_int_equal(rpc_client_new(&f->client), VARLOG_OK);
}

void fixture_start(srv_fixture_t *f, int32_t topics, int32_t ls, uint64_t max_bytes)
{
    varlog_server_opts_t o = {
        .topics = topics, .log_streams_per_topic = ls, .max_bytes = max_bytes};
    fixture_start_opts(f, &o);
}

void fixture_start_full(srv_fixture_t *f, int32_t topics, int32_t ls, uint64_t max_bytes)
{
    varlog_server_opts_t o = {.topics = topics,
                              .log_streams_per_topic = ls,
                              .max_bytes = max_bytes,
                              .refuse_when_full = true};
    fixture_start_opts(f, &o);
}

void fixture_stop(srv_fixture_t *f)
{
    rpc_client_destroy(f->client);
    varlog_server_destroy(f->srv);
    memset(f, 0, sizeof(*f));
}

int fixture_setup(void **state, int32_t topics, int32_t ls)
{
    srv_fixture_t *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    fixture_start(f, topics, ls, 0);
    *state = f;
    return 0;
}

int fixture_teardown(void **state)
{
    srv_fixture_t *f = *state;
    fixture_stop(f);
    free(f);
    return 0;
}

void free_msg(void *m)
{
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
}

Varlog__Snpb__AppendRequest *append_request(int32_t topic, int32_t ls, size_t n, const char *tag)
{
    Varlog__Snpb__AppendRequest *r = calloc(1, sizeof(*r));
    assert_non_null(r);
    varlog__snpb__append_request__init(r);
    r->topic_id = topic;
    r->log_stream_id = ls;
    r->n_payload = n;
    r->payload = calloc(n ? n : 1, sizeof(*r->payload));
    assert_non_null(r->payload);
    for (size_t i = 0; i < n; i++) {
        char buf[64];
        int len = snprintf(buf, sizeof(buf), "%s-%zu", tag ? tag : "p", i);
        r->payload[i].data = (uint8_t *)strdup(buf);
        r->payload[i].len = (size_t)len;
    }
    return r;
}

void append_request_free(Varlog__Snpb__AppendRequest *r)
{
    for (size_t i = 0; i < r->n_payload; i++)
        free(r->payload[i].data);
    free(r->payload);
    free(r);
}

varlog_err_t append_batches(srv_fixture_t *f, int32_t topic, int32_t ls, size_t n_reqs, size_t per,
                            uint64_t *first_glsn, uint64_t *first_llsn, size_t *answered,
                            rpc_status_t *st)
{
    rpc_stream_opts_t o = {.kind = RPC_STREAM_BIDI,
                           .response = &varlog__snpb__append_response__descriptor,
                           .recv_window = 64,
                           .timeout_ms = T_TIMEOUT};
    rpc_stream_t *s = NULL;
    assert_int_equal(rpc_stream_open(f->client, f->addr, M_PATH_APPEND, &o, NULL, &s), VARLOG_OK);
    for (size_t i = 0; i < n_reqs; i++) {
        Varlog__Snpb__AppendRequest *r = append_request(topic, ls, per, "p");
        rpc_stream_send(s, &r->base);
        append_request_free(r);
    }
    rpc_stream_close_send(s);
    size_t got = 0;
    varlog_err_t err;
    for (;;) {
        ProtobufCMessage *m = NULL;
        err = rpc_stream_recv(s, T_TIMEOUT, &m);
        if (err != VARLOG_OK)
            break;
        const Varlog__Snpb__AppendResponse *resp = (const Varlog__Snpb__AppendResponse *)m;
        assert_int_equal(resp->n_results, per);
        for (size_t i = 0; i < resp->n_results; i++) {
            const Varlog__Varlogpb__LogEntryMeta *meta = resp->results[i]->meta;
            assert_non_null(meta);
            assert_int_equal(meta->topic_id, topic);
            assert_int_equal(meta->log_stream_id, ls);
            /* A batch gets consecutive numbers. */
            assert_int_equal(meta->glsn, resp->results[0]->meta->glsn + i);
            assert_int_equal(meta->llsn, resp->results[0]->meta->llsn + i);
            assert_string_equal(resp->results[i]->error, "");
        }
        if (got < n_reqs) {
            if (first_glsn)
                first_glsn[got] = resp->results[0]->meta->glsn;
            if (first_llsn)
                first_llsn[got] = resp->results[0]->meta->llsn;
        }
        got++;
        free_msg(m);
    }
    if (answered)
        *answered = got;
    if (st && rpc_stream_status(s))
        rpc_status_copy(st, rpc_stream_status(s));
    rpc_stream_destroy(s);
    if (err == VARLOG_ERR_END) {
        assert_int_equal(got, n_reqs);
        return VARLOG_OK;
    }
    return err;
}

rpc_stream_t *subscribe_open(srv_fixture_t *f, bool by_llsn, int32_t topic, int32_t ls,
                             uint64_t begin, uint64_t end, size_t window)
{
    rpc_stream_opts_t o = {.kind = RPC_STREAM_SERVER,
                           .response = by_llsn ? &varlog__snpb__subscribe_to_response__descriptor
                                               : &varlog__snpb__subscribe_response__descriptor,
                           .recv_window = window ? window : 16,
                           .timeout_ms = -1};
    rpc_stream_t *s = NULL;
    if (by_llsn) {
        Varlog__Snpb__SubscribeToRequest r = VARLOG__SNPB__SUBSCRIBE_TO_REQUEST__INIT;
        r.topic_id = topic;
        r.log_stream_id = ls;
        r.llsn_begin = begin;
        r.llsn_end = end;
        assert_int_equal(rpc_stream_open(f->client, f->addr, M_PATH_SUBSCRIBE_TO, &o, &r.base, &s),
                         VARLOG_OK);
    } else {
        Varlog__Snpb__SubscribeRequest r = VARLOG__SNPB__SUBSCRIBE_REQUEST__INIT;
        r.topic_id = topic;
        r.log_stream_id = ls;
        r.glsn_begin = begin;
        r.glsn_end = end;
        assert_int_equal(rpc_stream_open(f->client, f->addr, M_PATH_SUBSCRIBE, &o, &r.base, &s),
                         VARLOG_OK);
    }
    return s;
}

varlog_err_t subscribe_collect(rpc_stream_t *s, size_t max, int64_t timeout_ms, uint64_t *glsns,
                               uint64_t *llsns, size_t *n)
{
    size_t got = 0;
    varlog_err_t err = VARLOG_OK;
    while (got < max) {
        ProtobufCMessage *m = NULL;
        err = rpc_stream_recv(s, timeout_ms, &m);
        if (err != VARLOG_OK)
            break;
        uint64_t g, l;
        if (m->descriptor == &varlog__snpb__subscribe_response__descriptor) {
            const Varlog__Snpb__SubscribeResponse *r = (const Varlog__Snpb__SubscribeResponse *)m;
            g = r->glsn;
            l = r->llsn;
        } else {
            const Varlog__Snpb__SubscribeToResponse *r =
                (const Varlog__Snpb__SubscribeToResponse *)m;
            assert_non_null(r->log_entry);
            assert_non_null(r->log_entry->meta);
            g = r->log_entry->meta->glsn;
            l = r->log_entry->meta->llsn;
        }
        if (glsns)
            glsns[got] = g;
        if (llsns)
            llsns[got] = l;
        got++;
        free_msg(m);
    }
    *n = got;
    return err;
}

varlog_err_t replica_md(srv_fixture_t *f, int32_t topic, int32_t ls,
                        Varlog__Snpb__LogStreamReplicaMetadataResponse **resp, rpc_status_t *st)
{
    Varlog__Snpb__LogStreamReplicaMetadataRequest r =
        VARLOG__SNPB__LOG_STREAM_REPLICA_METADATA_REQUEST__INIT;
    r.topic_id = topic;
    r.log_stream_id = ls;
    ProtobufCMessage *m = NULL;
    varlog_err_t err = rpc_unary(f->client, f->addr, M_PATH_REPLICA_MD, &r.base,
                                 &varlog__snpb__log_stream_replica_metadata_response__descriptor,
                                 T_TIMEOUT, &m, st);
    *resp = (Varlog__Snpb__LogStreamReplicaMetadataResponse *)m;
    return err;
}

varlog_err_t trim_call(srv_fixture_t *f, int32_t topic, uint64_t glsn)
{
    Varlog__Snpb__TrimDeprecatedRequest r = VARLOG__SNPB__TRIM_DEPRECATED_REQUEST__INIT;
    r.topic_id = topic;
    r.glsn = glsn;
    ProtobufCMessage *m = NULL;
    varlog_err_t err = rpc_unary(f->client, f->addr, M_PATH_TRIM, &r.base,
                                 &google__protobuf__empty__descriptor, T_TIMEOUT, &m, NULL);
    free_msg(m);
    return err;
}

varlog_err_t get_metadata(srv_fixture_t *f, Varlog__Mrpb__GetMetadataResponse **resp)
{
    Varlog__Mrpb__GetMetadataRequest r = VARLOG__MRPB__GET_METADATA_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    varlog_err_t err =
        rpc_unary(f->client, f->addr, M_PATH_METADATA, &r.base,
                  &varlog__mrpb__get_metadata_response__descriptor, T_TIMEOUT, &m, NULL);
    *resp = (Varlog__Mrpb__GetMetadataResponse *)m;
    return err;
}
