#include "vq/err.h"

const char *vq_err_str(int err)
{
    switch (err) {
    case VQ_OK:
        return "ok";
    case VQ_ERR_INVALID:
        return "invalid argument";
    case VQ_ERR_NOMEM:
        return "out of memory";
    case VQ_ERR_FULL:
        return "maximum size limit reached";
    case VQ_ERR_SHUTDOWN:
        return "queue has been shut down";
    case VQ_ERR_EMPTY:
        return "no task in queue";
    case VQ_ERR_CLOSED:
        return "queue has been closed and drained";
    case VQ_ERR_TIMEOUT:
        return "deadline exceeded";
    case VQ_ERR_CANCELLED:
        return "cancelled";
    case VQ_ERR_PANIC:
        return "handler panicked";
    case VQ_ERR_THREAD:
        return "cannot create thread";
    case VQ_ERR_BUSY:
        return "busy";
    case VQ_ERR_NOT_FOUND:
        return "not found";
    default:
        return err >= VQ_ERR_USER ? "handler error" : "unknown error";
    }
}
