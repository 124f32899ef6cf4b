/* Subscriptions: the public calls and their lifecycle. (Stub until implemented.) */
#include "varlog/subscribe.h"

varlog_err_t varlog_subscribe(varlog_client_t *client, int32_t topic_id, uint64_t begin_glsn,
                              uint64_t end_glsn, const varlog_subscribe_handlers_t *handlers,
                              varlog_subscription_t **out)
{
    (void)client, (void)topic_id, (void)begin_glsn, (void)end_glsn, (void)handlers, (void)out;
    return VARLOG_ERR_INTERNAL;
}

varlog_err_t varlog_subscribe_iter(varlog_client_t *client, int32_t topic_id, uint64_t begin_glsn,
                                   uint64_t end_glsn, varlog_subscription_t **out)
{
    (void)client, (void)topic_id, (void)begin_glsn, (void)end_glsn, (void)out;
    return VARLOG_ERR_INTERNAL;
}

varlog_err_t varlog_subscribe_to(varlog_client_t *client, int32_t topic_id, int32_t log_stream_id,
                                 uint64_t begin_llsn, uint64_t end_llsn,
                                 const varlog_subscribe_handlers_t *handlers,
                                 varlog_subscription_t **out)
{
    (void)client, (void)topic_id, (void)log_stream_id, (void)begin_llsn, (void)end_llsn,
        (void)handlers, (void)out;
    return VARLOG_ERR_INTERNAL;
}

varlog_err_t varlog_subscribe_to_iter(varlog_client_t *client, int32_t topic_id,
                                      int32_t log_stream_id, uint64_t begin_llsn, uint64_t end_llsn,
                                      varlog_subscription_t **out)
{
    (void)client, (void)topic_id, (void)log_stream_id, (void)begin_llsn, (void)end_llsn, (void)out;
    return VARLOG_ERR_INTERNAL;
}

varlog_err_t varlog_subscription_next(varlog_subscription_t *sub, int64_t timeout_ms,
                                      varlog_entry_t *entry)
{
    (void)sub, (void)timeout_ms, (void)entry;
    return VARLOG_ERR_INTERNAL;
}

varlog_err_t varlog_subscription_stats(varlog_subscription_t *sub, varlog_subscription_stats_t *out)
{
    (void)sub, (void)out;
    return VARLOG_ERR_INTERNAL;
}

void varlog_subscription_close(varlog_subscription_t **sub)
{
    (void)sub;
}
