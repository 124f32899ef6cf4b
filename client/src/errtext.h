#ifndef VARLOG_ERRTEXT_H
#define VARLOG_ERRTEXT_H

/* The per-thread text behind varlog_last_error(). */
#include <stdbool.h>
#include <stddef.h>

#include "varlog/error.h"

/* Formats the calling thread's last-error text and returns err, so a failure path reads
 * `return errtext_set(VARLOG_ERR_INVALID_ARG, "...", ...);`. */
varlog_err_t errtext_set(varlog_err_t err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Copies the calling thread's last-error text into dst (NUL-terminated; NULL/0 = no-op). */
void errtext_copy(char *dst, size_t size);

/* A public call that may fail internally and still succeed (an append whose retry
 * succeeded) brackets its work with these, so that its success leaves the thread's last
 * error as it found it: the text is saved on the first errtext_set inside the bracket and
 * put back by errtext_guard_end(true). Brackets nest (a log callback's call inside a call);
 * only the outermost restores. Cheap when nothing fails: two thread-local updates. */
void errtext_guard_begin(void);
void errtext_guard_end(bool succeeded);

#endif
