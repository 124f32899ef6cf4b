#include <stdarg.h>
#include <stdio.h>

#include "errtext.h"
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

static _Thread_local log_deferred_t *deferred;

void log_defer_begin(log_deferred_t *buf)
{
    buf->n = buf->dropped = 0;
    deferred = buf;
}

static void emit(const log_sink_t *sink, varlog_log_level_t level, varlog_log_ctx_t ctx,
                 const char *line)
{
    if (sink->cb) {
        /* A callback that calls back into the library must not replace the reason of the
         * failure this thread is about to report. */
        char saved[512];
        errtext_copy(saved, sizeof(saved));
        sink->cb(sink->opaque, level, ctx, line);
        errtext_set(VARLOG_OK, "%s", saved);
        return;
    }
    /* One fprintf per line so that lines from several threads do not interleave. */
    fprintf(stderr, "varlog %s [%s] %s\n", varlog_log_level_name(level), varlog_log_ctx_name(ctx),
            line);
}

void log_defer_end(const log_sink_t *sink, log_deferred_t *buf)
{
    deferred = NULL;
    for (int i = 0; i < buf->n; i++)
        emit(sink, buf->lines[i].level, buf->lines[i].ctx, buf->lines[i].line);
    if (buf->dropped)
        emit(sink, VARLOG_LOG_WARNING, VARLOG_LOG_CTX_METADATA,
             "(log lines dropped while a metadata call was in flight)");
}

void log_line(const log_sink_t *sink, varlog_log_level_t level, varlog_log_ctx_t ctx,
              const char *fmt, ...)
{
    if (!sink || !log_enabled(sink, level, ctx))
        return;
    va_list ap;
    va_start(ap, fmt);
    if (deferred) {
        if (deferred->n == LOG_DEFERRED_MAX) {
            deferred->dropped++;
        } else {
            deferred->lines[deferred->n].level = level;
            deferred->lines[deferred->n].ctx = ctx;
            vsnprintf(deferred->lines[deferred->n].line, sizeof(deferred->lines[0].line), fmt, ap);
            deferred->n++;
        }
        va_end(ap);
        return;
    }
    char line[1024];
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    emit(sink, level, ctx, line);
}
