#ifndef VARLOG_BENCH_CLIENT_H
#define VARLOG_BENCH_CLIENT_H

/* What bench_append and bench_subscribe share: their client. */
#include "varlog/varlog.h"

/* A client of the metadata repository at address with the benchmarks' base properties (no
 * periodic refresh, log level err), then the name, value pairs of extra (NULL-terminated;
 * NULL for none). 0 with *out open, or -1 after a message on stderr. */
int bench_client_open(const char *address, const char *const *extra, varlog_client_t **out);

#endif
