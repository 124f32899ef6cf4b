#ifndef VARLOG_OUTCOME_H
#define VARLOG_OUTCOME_H

/* What a failed append attempt tells about its records and its log stream, judged by what
 * the server can have done before it answered with that status (docs/ARCHITECTURE.md has the
 * table). Shared by every append path, so that a status means the same everywhere. */
#include <stdbool.h>

#include "varlog/error.h"

typedef struct append_verdict {
    varlog_err_t err; /* the error to report (SEALED, TIMED_OUT, CLOSED replace raw codes) */
    bool ambiguous;   /* the records may have been stored */
    bool deny;        /* the log stream itself failed: skip it for a while */
    bool retriable;   /* another attempt may succeed */
} append_verdict_t;

/* Classifies the final error of one attempt: err is the call's final status (or a local
 * error), msg its status message ("" when none), sent whether the request was handed to the
 * transport, closing whether the client is closing, own_deadline whether a deadline that
 * struck was the caller's own (false: a bound on the attempt alone, which then implicates
 * the node). Pure; never blocks. */
append_verdict_t append_classify(varlog_err_t err, const char *msg, bool sent, bool closing,
                                 bool own_deadline);

#endif
