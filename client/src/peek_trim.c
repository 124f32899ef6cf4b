/* varlog_peek and varlog_trim: unary calls to a log stream's replicas or a topic's storage
 * nodes. (Stub until implemented.) */
#include "varlog/subscribe.h"

varlog_err_t varlog_peek(varlog_client_t *client, int32_t topic_id, int32_t log_stream_id,
                         int64_t timeout_ms, varlog_entry_meta_t *first, varlog_entry_meta_t *last,
                         bool *complete)
{
    (void)client, (void)topic_id, (void)log_stream_id, (void)timeout_ms, (void)first, (void)last,
        (void)complete;
    return VARLOG_ERR_INTERNAL;
}

varlog_err_t varlog_trim(varlog_client_t *client, int32_t topic_id, uint64_t until_glsn,
                         int64_t timeout_ms)
{
    (void)client, (void)topic_id, (void)until_glsn, (void)timeout_ms;
    return VARLOG_ERR_INTERNAL;
}
