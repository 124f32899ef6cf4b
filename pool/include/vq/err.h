#ifndef VQ_ERR_H
#define VQ_ERR_H

/* Return codes shared by every pool/ subsystem. Task handlers return 0 for success and any
 * other int for failure; a handler's own codes should start at VQ_ERR_USER so they never
 * collide with the engine's. */

typedef enum vq_err {
    VQ_OK = 0,
    VQ_ERR_INVALID = 1, /* bad argument, or a call in a state that forbids it */
    VQ_ERR_NOMEM,       /* an allocation failed; nothing was changed */
    VQ_ERR_FULL,        /* the queue limit is reached; the task was not queued */
    VQ_ERR_SHUTDOWN,    /* the ring or engine has been shut down; intake is closed */
    VQ_ERR_EMPTY,       /* nothing queued right now */
    VQ_ERR_CLOSED,      /* shut down and drained: nothing will ever be queued again */
    VQ_ERR_TIMEOUT,     /* the task's deadline passed before it produced a result */
    VQ_ERR_CANCELLED,   /* the wait was cut short by a shutdown */
    VQ_ERR_PANIC,       /* a handler reported an unrecoverable fault: no retry, logged */
    VQ_ERR_THREAD,      /* a thread could not be created */
    VQ_ERR_BUSY,        /* the call would deadlock or the object is still in use */
    VQ_ERR_NOT_FOUND,   /* a lookup found nothing for this key */
    VQ_ERR_USER = 1000  /* first code free for handlers */
} vq_err_t;

/* Static, never-NULL description of a code; codes >= VQ_ERR_USER give "handler error",
 * unknown codes "unknown error". Thread-safe, does not block, allocates nothing. */
const char *vq_err_str(int err);

#endif
