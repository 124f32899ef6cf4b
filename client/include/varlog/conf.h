#ifndef VARLOG_CONF_H
#define VARLOG_CONF_H

/*
 * Client configuration: named properties set from strings, plus typed setters for
 * callbacks. One table in the library defines every property (type, default, range, unit,
 * description); CONFIGURATION.md is generated from it. A value is checked when it is set:
 * an unknown name or a value of the wrong type or out of range is refused with a text that
 * names the property and what it accepts, and the configuration keeps its previous value.
 * Nothing is clamped. Checks that involve several properties run in varlog_client_new.
 *
 * A configuration object is not thread-safe: set it up on one thread, then hand it to
 * varlog_client_new, which takes ownership on success.
 */
#include <stddef.h>

#include "varlog/error.h"
#include "varlog/export.h"
#include "varlog/log.h"
#include "varlog/stats.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct varlog_conf varlog_conf_t;

/* A configuration with every property at its default. Owned by the caller until
 * varlog_client_new takes it (or varlog_conf_destroy). NULL when out of memory. */
VARLOG_API varlog_conf_t *varlog_conf_new(void);

/* A deep copy of conf (callbacks and their opaque pointers are copied as pointers). NULL
 * when conf is NULL or memory runs out. */
VARLOG_API varlog_conf_t *varlog_conf_dup(const varlog_conf_t *conf);

/* Frees conf. Accepts NULL. */
VARLOG_API void varlog_conf_destroy(varlog_conf_t *conf);

/* Sets property `name` from its string form: integers in decimal, booleans as
 * true/false (also 1/0, yes/no, on/off), lists comma-separated. name and value are
 * borrowed. On failure the property keeps its value and errstr (optional, errstr_size
 * bytes, always NUL-terminated) and varlog_last_error() explain, e.g.
 * `append.retries: 1000 is out of range [0, 100]`. Does not block.
 * Errors: INVALID_ARG (NULL conf, name or value; unknown property; value of the wrong type
 * or out of range), NOMEM (copying a list value). */
VARLOG_API varlog_err_t varlog_conf_set(varlog_conf_t *conf, const char *name, const char *value,
                                        char *errstr, size_t errstr_size);

/* Writes property `name`'s current value in canonical string form into buf (*size bytes)
 * and sets *size to the length needed including the NUL; with buf NULL or *size too small
 * only *size is set and nothing is written. Does not block.
 * Errors: INVALID_ARG (NULL conf, name or size; unknown property). */
VARLOG_API varlog_err_t varlog_conf_get(const varlog_conf_t *conf, const char *name, char *buf,
                                        size_t *size);

/* Routes the client's log lines to cb (NULL restores the stderr default). opaque is passed
 * through untouched; it must stay valid for as long as a client made from conf lives. See
 * varlog_log_cb for the thread it runs on. */
VARLOG_API void varlog_conf_set_log_cb(varlog_conf_t *conf, varlog_log_cb *cb, void *opaque);

/* Emits the client's statistics to cb every stats.interval.ms (see varlog_stats_cb in
 * varlog/stats.h for the thread and the document); NULL, or stats.interval.ms 0, emits
 * nothing. opaque is passed through untouched; it must stay valid for as long as a client
 * made from conf lives. Does not block. Accepts a NULL conf (does nothing). */
VARLOG_API void varlog_conf_set_stats_cb(varlog_conf_t *conf, varlog_stats_cb *cb, void *opaque);

/* Calls cb once per entry every subscription of a client made from conf delivers, with the
 * entry's position and its four stage durations, while subscribe.stage.timing is true (with
 * it false cb is never called). See varlog_subscribe_observer_cb in varlog/stats.h for the
 * thread and what cb may do. NULL removes it. opaque is passed through untouched; it must
 * stay valid for as long as a client made from conf lives. Does not block. Accepts a NULL
 * conf (does nothing). */
VARLOG_API void varlog_conf_set_subscribe_observer(varlog_conf_t *conf,
                                                   varlog_subscribe_observer_cb *cb, void *opaque);

/* Iterates the property table: the name of property i (0-based) or NULL past the end.
 * For tools that list or dump the configuration. Static strings; any thread. */
VARLOG_API const char *varlog_conf_property_name(size_t i);

#ifdef __cplusplus
}
#endif
#endif
