#ifndef VARLOG_LOG_INTERNAL_H
#define VARLOG_LOG_INTERNAL_H

/* Where a client's log lines go, fixed when the client is created. */
#include <stdbool.h>

#include "varlog/log.h"

typedef struct log_sink {
    varlog_log_level_t level; /* lines at or above this severity (numerically <=) */
    unsigned debug;           /* contexts whose DEBUG lines pass as well */
    varlog_log_cb *cb;        /* NULL = stderr */
    void *opaque;
} log_sink_t;

/* Whether a line of this level and context would be emitted; cheap, so call sites can
 * skip building arguments. */
static inline bool log_enabled(const log_sink_t *sink, varlog_log_level_t level,
                               varlog_log_ctx_t ctx)
{
    return level <= sink->level || (level == VARLOG_LOG_DEBUG && (sink->debug & (unsigned)ctx));
}

/* Formats and emits one line when enabled. Must be called with no internal lock held: it
 * runs the user's callback on the calling thread. */
void log_line(const log_sink_t *sink, varlog_log_level_t level, varlog_log_ctx_t ctx,
              const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
