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

/* Lines logged while a thread holds something other threads wait for (the one GetMetadata in
 * flight) are kept in a buffer and emitted once it let go, so that a callback which calls
 * back into the library never waits for its own thread. */
#define LOG_DEFERRED_MAX 8
typedef struct log_deferred {
    int n, dropped;
    struct {
        varlog_log_level_t level;
        varlog_log_ctx_t ctx;
        char line[256];
    } lines[LOG_DEFERRED_MAX];
} log_deferred_t;

/* Starts keeping this thread's lines in buf (caller-owned, until log_defer_end). */
void log_defer_begin(log_deferred_t *buf);
/* Stops keeping lines and emits the kept ones through sink, on the calling thread. */
void log_defer_end(const log_sink_t *sink, log_deferred_t *buf);

#endif
