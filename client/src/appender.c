/* The pipelined appender (varlog/appender.h). Being written: this stub refuses every call. */
#include "client_internal.h"
#include "errtext.h"
#include "varlog/appender.h"

varlog_err_t varlog_appender_new(varlog_client_t *client, int32_t topic_id, int32_t log_stream_id,
                                 varlog_appender_t **out)
{
    (void)client;
    (void)topic_id;
    (void)log_stream_id;
    if (out)
        *out = NULL;
    return errtext_set(VARLOG_ERR_INTERNAL, "appender: not implemented yet");
}

varlog_err_t varlog_appender_append(varlog_appender_t *app, const varlog_record_t *records,
                                    size_t n, int64_t timeout_ms, varlog_append_cb *cb,
                                    void *opaque)
{
    (void)app;
    (void)records;
    (void)n;
    (void)timeout_ms;
    (void)cb;
    (void)opaque;
    return VARLOG_ERR_INTERNAL;
}

varlog_err_t varlog_appender_flush(varlog_appender_t *app, int64_t timeout_ms,
                                   size_t *still_pending)
{
    (void)app;
    (void)timeout_ms;
    (void)still_pending;
    return VARLOG_ERR_INTERNAL;
}

varlog_err_t varlog_appender_close(varlog_appender_t **app, int64_t timeout_ms)
{
    (void)app;
    (void)timeout_ms;
    return VARLOG_OK;
}

varlog_err_t varlog_appender_stats(varlog_appender_t *app, varlog_appender_stats_t *out)
{
    (void)app;
    (void)out;
    return VARLOG_ERR_INTERNAL;
}
