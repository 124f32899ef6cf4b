/* The outcome rules of every append: one place that says, for each status, whether the
 * server can have stored the records, whether the log stream is to blame and whether to try
 * again. A refusal the server makes before storing anything is NOT_APPENDED whatever was
 * sent; everything else after a request left is MAYBE_APPENDED. */
#include "outcome.h"

#include <string.h>

append_verdict_t append_classify(varlog_err_t err, const char *msg, bool sent, bool closing,
                                 bool own_deadline)
{
    append_verdict_t v = {.err = err, .ambiguous = sent};
    switch (err) {
    case VARLOG_OK:
        v.ambiguous = false;
        return v;
    case VARLOG_ERR_CLOSED:
    case VARLOG_ERR_RPC_CANCELLED:
        if (closing) {
            v.err = VARLOG_ERR_CLOSED;
            return v;
        }
        /* Cancelled by someone else (a proxy, the server's shutdown): a broken call. */
        v.deny = v.retriable = true;
        return v;
    case VARLOG_ERR_TIMED_OUT:
    case VARLOG_ERR_RPC_DEADLINE_EXCEEDED:
        if (own_deadline) {
            /* The caller's deadline (gRPC may fire it a moment before our clock says so):
             * it says nothing about the log stream. */
            v.err = VARLOG_ERR_TIMED_OUT;
            return v;
        }
        /* Only the attempt's own bound passed: the node did not answer in time. */
        v.err = VARLOG_ERR_RPC_DEADLINE_EXCEEDED;
        v.deny = v.retriable = true;
        return v;
    case VARLOG_ERR_RPC_FAILED_PRECONDITION:
        /* Varlog's sealed (and sealing, learning) replicas refuse before writing; Go
         * matches the word. */
        v.ambiguous = false;
        v.deny = true;
        v.retriable = strstr(msg, "sealed") != NULL;
        if (v.retriable)
            v.err = VARLOG_ERR_SEALED;
        return v;
    case VARLOG_ERR_RPC_NOT_FOUND:          /* the replica is not on that node */
    case VARLOG_ERR_RPC_RESOURCE_EXHAUSTED: /* a size limit or a full node, before storing */
        v.ambiguous = false;
        v.deny = v.retriable = true;
        return v;
    case VARLOG_ERR_RPC_UNAVAILABLE:
        /* "not primary replica" is a refusal; any other UNAVAILABLE is a lost connection. */
        if (strstr(msg, "not primary"))
            v.ambiguous = false;
        v.deny = v.retriable = true;
        return v;
    case VARLOG_ERR_RPC_INVALID_ARGUMENT:
    case VARLOG_ERR_RPC_ALREADY_EXISTS:
    case VARLOG_ERR_RPC_PERMISSION_DENIED:
    case VARLOG_ERR_RPC_OUT_OF_RANGE:
    case VARLOG_ERR_RPC_UNIMPLEMENTED:
    case VARLOG_ERR_RPC_UNAUTHENTICATED:
        v.ambiguous = false; /* the request as such was refused */
        return v;
    case VARLOG_ERR_DECODE:
        v.ambiguous = true; /* an answer came but could not be read */
        return v;
    case VARLOG_ERR_NOMEM:
        v.retriable = true;
        return v;
    case VARLOG_ERR_ENCODE:
    case VARLOG_ERR_INVALID_ARG:
        return v;
    default:
        /* UNKNOWN ("closed" replica), INTERNAL, ABORTED, DATA_LOSS, END (an answerless end):
         * the server may have written before failing. */
        v.deny = v.retriable = true;
        return v;
    }
}
