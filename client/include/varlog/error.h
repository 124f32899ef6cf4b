#ifndef VARLOG_ERROR_H
#define VARLOG_ERROR_H

#include <stdbool.h>

#include "varlog/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The one error type of libvarlog. Every fallible call returns a varlog_err_t; 0 is success.
 *
 * Ranges:
 *   < 0        local errors, raised inside the library without a server being involved;
 *   1 .. 16    a gRPC status received from (or synthesized for) a remote call, same numbers
 *              as grpc_status_code (VARLOG_ERR_RPC_UNAVAILABLE = 14, ...);
 *   >= 100     Varlog conditions recognised in a server's status text or error details
 *              (a sealed log stream, a trimmed range, ...).
 */
typedef enum varlog_err {
    VARLOG_OK = 0,

    /* local */
    VARLOG_ERR_INVALID_ARG = -1,    /* bad argument: NULL, empty, out of range */
    VARLOG_ERR_NOMEM = -2,          /* an allocation failed */
    VARLOG_ERR_TIMED_OUT = -3,      /* the caller's timeout passed before the operation finished */
    VARLOG_ERR_CLOSED = -4,         /* the object was closed or is closing */
    VARLOG_ERR_QUEUE_FULL = -5,     /* a bounded queue is full; try again later */
    VARLOG_ERR_INTERNAL = -6,       /* a library bug or an unexpected gRPC refusal */
    VARLOG_ERR_END = -7,            /* end of a stream or range: not a failure */
    VARLOG_ERR_DECODE = -8,         /* a message from the peer could not be decoded */
    VARLOG_ERR_ENCODE = -9,         /* a message could not be encoded */
    VARLOG_ERR_STATE = -10,         /* the call is not allowed in the object's current state */
    VARLOG_ERR_UNKNOWN_TOPIC = -11, /* the cluster's metadata has no such topic */
    VARLOG_ERR_UNKNOWN_LOG_STREAM = -12, /* the topic has no such log stream */
    /* no log stream of the topic can take appends: it has none, or every one is sealed,
     * even in metadata fetched within metadata.recheck.interval.ms */
    VARLOG_ERR_NO_LOG_STREAM = -13,

    /* remote: gRPC status codes */
    VARLOG_ERR_RPC_CANCELLED = 1,
    VARLOG_ERR_RPC_UNKNOWN = 2,
    VARLOG_ERR_RPC_INVALID_ARGUMENT = 3,
    VARLOG_ERR_RPC_DEADLINE_EXCEEDED = 4,
    VARLOG_ERR_RPC_NOT_FOUND = 5,
    VARLOG_ERR_RPC_ALREADY_EXISTS = 6,
    VARLOG_ERR_RPC_PERMISSION_DENIED = 7,
    VARLOG_ERR_RPC_RESOURCE_EXHAUSTED = 8,
    VARLOG_ERR_RPC_FAILED_PRECONDITION = 9,
    VARLOG_ERR_RPC_ABORTED = 10,
    VARLOG_ERR_RPC_OUT_OF_RANGE = 11,
    VARLOG_ERR_RPC_UNIMPLEMENTED = 12,
    VARLOG_ERR_RPC_INTERNAL = 13,
    VARLOG_ERR_RPC_UNAVAILABLE = 14,
    VARLOG_ERR_RPC_DATA_LOSS = 15,
    VARLOG_ERR_RPC_UNAUTHENTICATED = 16,

    /* Varlog conditions */
    VARLOG_ERR_SEALED = 100,  /* the log stream is sealed: appends are refused ("sealed") */
    VARLOG_ERR_TRIMMED = 101, /* the range lies in a trimmed prefix ("logstream: trimmed") */
} varlog_err_t;

/* A short English description of err, e.g. "operation timed out". Never NULL; unknown values
 * give "unknown error". The string is static. Does not block; any thread. */
VARLOG_API const char *varlog_err_str(varlog_err_t err);

/* The enumerator's name without the prefix, e.g. "ERR_TIMED_OUT" or "OK". Never NULL; static.
 * Does not block; any thread. */
VARLOG_API const char *varlog_err_name(varlog_err_t err);

/* True when the same operation may succeed if repeated later without any change by the
 * caller (a transient condition such as UNAVAILABLE or QUEUE_FULL). Any thread. */
VARLOG_API bool varlog_err_is_retriable(varlog_err_t err);

/* The text of the most recent failure of a libvarlog call made by the calling thread: what
 * was wrong and where, e.g. "record 2 of 3 is empty (records need at least one byte)".
 * Each failing call replaces it; successful calls leave it alone, so read it right after
 * the failure. Never NULL ("" before any failure). The buffer belongs to the thread and
 * stays valid until its next libvarlog call. Does not block. */
VARLOG_API const char *varlog_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
