#include <stdarg.h>
#include <stdio.h>

#include "log_internal.h"

const char *varlog_log_level_name(varlog_log_level_t level)
{
    static const char *const names[] = {"EMERG",   "ALERT",  "CRIT", "ERR",
                                        "WARNING", "NOTICE", "INFO", "DEBUG"};
    if ((unsigned)level < sizeof(names) / sizeof(names[0]))
        return names[level];
    return "?";
}

const char *varlog_log_ctx_name(varlog_log_ctx_t ctx)
{
    switch (ctx) {
    case VARLOG_LOG_CTX_CONF:
        return "conf";
    case VARLOG_LOG_CTX_RPC:
        return "rpc";
    case VARLOG_LOG_CTX_METADATA:
        return "metadata";
    case VARLOG_LOG_CTX_APPEND:
        return "append";
    case VARLOG_LOG_CTX_SUBSCRIBE:
        return "subscribe";
    case VARLOG_LOG_CTX_RETRY:
        return "retry";
    }
    return "?";
}

void log_line(const log_sink_t *sink, varlog_log_level_t level, varlog_log_ctx_t ctx,
              const char *fmt, ...)
{
    if (!sink || !log_enabled(sink, level, ctx))
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (sink->cb) {
        sink->cb(sink->opaque, level, ctx, line);
        return;
    }
    /* One fprintf per line so that lines from several threads do not interleave. */
    fprintf(stderr, "varlog %s [%s] %s\n", varlog_log_level_name(level), varlog_log_ctx_name(ctx),
            line);
}
