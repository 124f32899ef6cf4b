#include "varlog/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "errtext.h"

struct err_desc {
    varlog_err_t err;
    const char *name;
    const char *text;
    bool retriable;
};

/* One row per code: the single place its name, text and retriability are decided. */
static const struct err_desc err_table[] = {
    {VARLOG_OK, "OK", "success", false},
    {VARLOG_ERR_INVALID_ARG, "ERR_INVALID_ARG", "invalid argument", false},
    {VARLOG_ERR_NOMEM, "ERR_NOMEM", "out of memory", true},
    {VARLOG_ERR_TIMED_OUT, "ERR_TIMED_OUT", "operation timed out", true},
    {VARLOG_ERR_CLOSED, "ERR_CLOSED", "closed", false},
    {VARLOG_ERR_QUEUE_FULL, "ERR_QUEUE_FULL", "queue is full", true},
    {VARLOG_ERR_INTERNAL, "ERR_INTERNAL", "internal error", false},
    {VARLOG_ERR_END, "ERR_END", "end of stream", false},
    {VARLOG_ERR_DECODE, "ERR_DECODE", "malformed message from peer", false},
    {VARLOG_ERR_ENCODE, "ERR_ENCODE", "message could not be encoded", false},
    {VARLOG_ERR_STATE, "ERR_STATE", "operation not allowed in the current state", false},
    {VARLOG_ERR_UNKNOWN_TOPIC, "ERR_UNKNOWN_TOPIC", "unknown topic", false},
    {VARLOG_ERR_UNKNOWN_LOG_STREAM, "ERR_UNKNOWN_LOG_STREAM", "unknown log stream", false},
    {VARLOG_ERR_NO_LOG_STREAM, "ERR_NO_LOG_STREAM", "no log stream of the topic can take appends",
     true},
    {VARLOG_ERR_RPC_CANCELLED, "ERR_RPC_CANCELLED", "rpc cancelled", false},
    {VARLOG_ERR_RPC_UNKNOWN, "ERR_RPC_UNKNOWN", "rpc failed: unknown error", false},
    {VARLOG_ERR_RPC_INVALID_ARGUMENT, "ERR_RPC_INVALID_ARGUMENT", "rpc failed: invalid argument",
     false},
    {VARLOG_ERR_RPC_DEADLINE_EXCEEDED, "ERR_RPC_DEADLINE_EXCEEDED", "rpc deadline exceeded", true},
    {VARLOG_ERR_RPC_NOT_FOUND, "ERR_RPC_NOT_FOUND", "rpc failed: not found", false},
    {VARLOG_ERR_RPC_ALREADY_EXISTS, "ERR_RPC_ALREADY_EXISTS", "rpc failed: already exists", false},
    {VARLOG_ERR_RPC_PERMISSION_DENIED, "ERR_RPC_PERMISSION_DENIED", "rpc failed: permission denied",
     false},
    {VARLOG_ERR_RPC_RESOURCE_EXHAUSTED, "ERR_RPC_RESOURCE_EXHAUSTED",
     "rpc failed: resource exhausted", true},
    {VARLOG_ERR_RPC_FAILED_PRECONDITION, "ERR_RPC_FAILED_PRECONDITION",
     "rpc failed: failed precondition", false},
    {VARLOG_ERR_RPC_ABORTED, "ERR_RPC_ABORTED", "rpc aborted", true},
    {VARLOG_ERR_RPC_OUT_OF_RANGE, "ERR_RPC_OUT_OF_RANGE", "rpc failed: out of range", false},
    {VARLOG_ERR_RPC_UNIMPLEMENTED, "ERR_RPC_UNIMPLEMENTED", "rpc method not implemented", false},
    {VARLOG_ERR_RPC_INTERNAL, "ERR_RPC_INTERNAL", "rpc failed: server internal error", false},
    {VARLOG_ERR_RPC_UNAVAILABLE, "ERR_RPC_UNAVAILABLE", "rpc failed: unavailable", true},
    {VARLOG_ERR_RPC_DATA_LOSS, "ERR_RPC_DATA_LOSS", "rpc failed: data loss", false},
    {VARLOG_ERR_RPC_UNAUTHENTICATED, "ERR_RPC_UNAUTHENTICATED", "rpc failed: unauthenticated",
     false},
    {VARLOG_ERR_SEALED, "ERR_SEALED", "log stream is sealed", true},
    {VARLOG_ERR_TRIMMED, "ERR_TRIMMED", "range is trimmed", false},
};

static const struct err_desc *err_lookup(varlog_err_t err)
{
    for (size_t i = 0; i < sizeof(err_table) / sizeof(err_table[0]); i++) {
        if (err_table[i].err == err)
            return &err_table[i];
    }
    return NULL;
}

const char *varlog_err_str(varlog_err_t err)
{
    const struct err_desc *d = err_lookup(err);
    return d ? d->text : "unknown error";
}

const char *varlog_err_name(varlog_err_t err)
{
    const struct err_desc *d = err_lookup(err);
    return d ? d->name : "ERR_UNKNOWN_CODE";
}

bool varlog_err_is_retriable(varlog_err_t err)
{
    const struct err_desc *d = err_lookup(err);
    return d ? d->retriable : false;
}

/* Per-thread so that a client shared by threads never mixes their reasons. */
static _Thread_local char last_error[512];

const char *varlog_last_error(void)
{
    return last_error;
}

static _Thread_local struct {
    unsigned depth;
    bool saved;
    char text[512];
} guard;

void errtext_guard_begin(void)
{
    if (guard.depth++ == 0)
        guard.saved = false;
}

void errtext_guard_end(bool succeeded)
{
    if (--guard.depth == 0 && succeeded && guard.saved)
        memcpy(last_error, guard.text, sizeof(last_error));
}

varlog_err_t errtext_set(varlog_err_t err, const char *fmt, ...)
{
    if (guard.depth && !guard.saved) {
        memcpy(guard.text, last_error, sizeof(guard.text));
        guard.saved = true;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return err;
}

void errtext_copy(char *dst, size_t size)
{
    if (dst && size > 0)
        snprintf(dst, size, "%s", last_error);
}
