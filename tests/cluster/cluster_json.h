#ifndef VARLOG_CLUSTER_JSON_H
#define VARLOG_CLUSTER_JSON_H

/* Just enough JSON for comparing varlogctl's answers with the admin API's: the values of a
 * key, in document order, wherever they are nested. */
#include <stddef.h>

/* Integer values of "key"; returns how many were found (at most cap stored). */
size_t json_ints(const char *json, const char *key, long long *out, size_t cap);
/* String values of "key", each truncated to len bytes; returns how many were found. */
size_t json_strs(const char *json, const char *key, char (*out)[128], size_t cap);
/* Boolean values of "key" (1/0). */
size_t json_bools(const char *json, const char *key, int *out, size_t cap);

#endif
