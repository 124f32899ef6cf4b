#ifndef VQ_LOGGER_H
#define VQ_LOGGER_H

/* The engine's logging interface. Implementations must be thread-safe: the engine calls
 * them from its worker threads. */
#include <stdarg.h>
#include <stdbool.h>

typedef enum vq_log_level { VQ_LOG_INFO, VQ_LOG_ERROR, VQ_LOG_FATAL } vq_log_level_t;

typedef struct vq_logger {
    void *ctx;
    /* Required. Must not block for long: it runs on worker threads. */
    void (*log)(void *ctx, vq_log_level_t level, const char *fmt, va_list ap);
    /* Optional. Consulted before every retry line; when it returns false the retry path
     * builds no arguments and makes no call. NULL counts as "enabled". */
    bool (*info_enabled)(void *ctx);
} vq_logger_t;

/* True when info lines would be emitted: l is non-NULL and its hook is absent or says yes.
 * Does not block beyond the hook; runs the hook on the calling thread. */
bool vq_logger_info_enabled(const vq_logger_t *l);

/* Formats and emits one line through l (a NULL l drops it). Runs l->log on the calling
 * thread. No errors. */
void vq_log(const vq_logger_t *l, vq_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A logger writing "INFO: ", "ERROR: " or "FATAL: " lines to stderr (one fprintf per line,
 * so lines do not interleave). Static; never freed. */
const vq_logger_t *vq_logger_stderr(void);

/* A logger that drops everything and reports info as disabled. Static; never freed. */
const vq_logger_t *vq_logger_discard(void);

#endif
