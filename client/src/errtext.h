#ifndef VARLOG_ERRTEXT_H
#define VARLOG_ERRTEXT_H

/* The per-thread text behind varlog_last_error(). */
#include <stddef.h>

#include "varlog/error.h"

/* Formats the calling thread's last-error text and returns err, so a failure path reads
 * `return errtext_set(VARLOG_ERR_INVALID_ARG, "...", ...);`. */
varlog_err_t errtext_set(varlog_err_t err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Copies the calling thread's last-error text into dst (NUL-terminated; NULL/0 = no-op). */
void errtext_copy(char *dst, size_t size);

#endif
