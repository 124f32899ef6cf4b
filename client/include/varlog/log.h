#ifndef VARLOG_LOG_H
#define VARLOG_LOG_H

/*
 * Logging. Each line has a syslog-like level and one context tag saying which part of the
 * library wrote it. Lines at or above the configured `log.level` (default "warning": a
 * healthy run is silent) are emitted; DEBUG lines only for the contexts listed in the
 * `debug` property (which also lowers the level to DEBUG for those contexts). Without a
 * callback, lines go to stderr as "varlog LEVEL [context] message".
 */
#include "varlog/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum varlog_log_level {
    VARLOG_LOG_EMERG = 0,
    VARLOG_LOG_ALERT = 1,
    VARLOG_LOG_CRIT = 2,
    VARLOG_LOG_ERR = 3,
    VARLOG_LOG_WARNING = 4,
    VARLOG_LOG_NOTICE = 5,
    VARLOG_LOG_INFO = 6,
    VARLOG_LOG_DEBUG = 7,
} varlog_log_level_t;

/* Context tags, one bit each so that the `debug` property can hold a set of them. */
typedef enum varlog_log_ctx {
    VARLOG_LOG_CTX_CONF = 1 << 0,      /* configuration and client creation */
    VARLOG_LOG_CTX_RPC = 1 << 1,       /* connections and calls */
    VARLOG_LOG_CTX_METADATA = 1 << 2,  /* discovery and metadata refresh */
    VARLOG_LOG_CTX_APPEND = 1 << 3,    /* appends and log stream selection */
    VARLOG_LOG_CTX_SUBSCRIBE = 1 << 4, /* subscriptions */
    VARLOG_LOG_CTX_RETRY = 1 << 5,     /* retries and their lookups */
} varlog_log_ctx_t;

#define VARLOG_LOG_CTX_ALL 0x3f

/*
 * A log callback. message is a NUL-terminated line without a trailing newline, valid only
 * during the call. It runs on whichever thread logs: the caller's own thread inside a
 * libvarlog call, the client's metadata thread or one of its retry workers; never while
 * the library holds an internal lock, so it may call libvarlog functions (except destroying
 * the client that logs). It should return quickly: the thread that logs waits for it.
 */
typedef void varlog_log_cb(void *opaque, varlog_log_level_t level, varlog_log_ctx_t ctx,
                           const char *message);

/* "EMERG", ..., "DEBUG"; "?" for an unknown value. Static; any thread. */
VARLOG_API const char *varlog_log_level_name(varlog_log_level_t level);

/* "conf", "rpc", "metadata", "append", "subscribe", "retry"; "?" for anything that is not
 * exactly one context bit. Static; any thread. */
VARLOG_API const char *varlog_log_ctx_name(varlog_log_ctx_t ctx);

#ifdef __cplusplus
}
#endif
#endif
