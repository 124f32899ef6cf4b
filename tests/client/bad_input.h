#ifndef VARLOG_BAD_INPUT_H
#define VARLOG_BAD_INPUT_H

/* The table that test_bad_input.c and test_bad_input_admin.c share: one row per bad call of a
 * public function, the answer its header documents, and a word its varlog_last_error() text
 * must hold. A runner goes through a table on the calling thread and reports every row that
 * answers otherwise, so that one run shows every mismatch rather than the first; it uses no
 * cmocka assertion, so that it can run on a library thread (an appender's callback), where
 * an assertion could not stop the test. */
#include <stdbool.h>
#include <stddef.h>

#include "varlog/error.h"

/* Each test file defines what its rows need (a client, an appender, an admin handle...). */
typedef struct bi_env bi_env_t;

typedef varlog_err_t bi_call_fn(bi_env_t *e);

/* What a call returns when its result broke a promise that is not its code (an out pointer
 * not reset, a count written on failure, a wrong name): bi_broken() says which. */
#define BI_BROKEN ((varlog_err_t)-1000)

/* text for a row whose function sets no last error (the embedded server's): not checked. */
#define BI_NO_TEXT NULL

typedef struct bi_row {
    const char *fn;    /* the public function */
    const char *input; /* what is wrong with the call, for the report */
    varlog_err_t want; /* the documented answer */
    varlog_err_t alt;  /* a second documented answer (a race the header allows), 0 if none */
    /* A failure: a word varlog_last_error() must hold (case-insensitive, '_' matching ' ').
     * VARLOG_OK: the last error must still be the sentinel the runner set (a success leaves
     * it alone). BI_NO_TEXT: not checked. */
    const char *text;
    bi_call_fn *call;
} bi_row_t;

/* A row's call: ROW for a body, CALL for one expression; R and R2 write a row. */
#define ROW(name) static varlog_err_t name(bi_env_t *e)
#define CALL(name, expr)                                                                           \
    ROW(name)                                                                                      \
    {                                                                                              \
        (void)e;                                                                                   \
        return (expr);                                                                             \
    }
/* A row's text: a string, or OK (no text expected) as NULL; clang refuses an enum constant
 * 0 as a null pointer. */
#define BI_TEXT(t) _Generic((t), char * : (t), const char * : (t), default : (const char *)NULL)
/* clang-format off */
#define R(fn, input, want, text, call) {#fn, input, want, 0, BI_TEXT(text), call}
#define R2(fn, input, want, alt, text, call) {#fn, input, want, alt, BI_TEXT(text), call}
/* clang-format on */
#define OK VARLOG_OK
#define INVAL VARLOG_ERR_INVALID_ARG
#define CLOSED VARLOG_ERR_CLOSED
#define TABLE(t) ((bi_table_t){t, sizeof(t) / sizeof(t[0])})

/* Makes the row's call report BI_BROKEN with this reason. */
varlog_err_t bi_broken(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* OK when got equals want, else BI_BROKEN naming both. For functions returning a string. */
varlog_err_t bi_expect_str(const char *what, const char *got, const char *want);

/* Before the first bi_run, on the test's main thread; bi_fini frees what it set up. */
void bi_init(void);
void bi_fini(void);

/* Runs rows[0..n) on this thread, prints every mismatch to stderr, returns their count. */
int bi_run(const char *context, const bi_row_t *rows, size_t n, bi_env_t *e);

/* Rows checked (all bi_run calls of the process), for the summary. */
size_t bi_rows_run(void);

/* A table and its length, for the two calls below. */
typedef struct bi_table {
    const bi_row_t *rows;
    size_t n;
} bi_table_t;

/* Distinct functions named by the tables' rows, for the summary. */
size_t bi_count_functions(const bi_table_t *tables, size_t n_tables);

/* Every function a public header declares with VARLOG_API that no row names: printed, and
 * counted. So a function added to the API without its rows fails the test. A declaration that
 * does not read as a function, or a header that cannot be read, counts as one. */
size_t bi_uncovered(const char *header_path, const bi_table_t *tables, size_t n_tables);

/* The public headers, as paths under source_dir: those varlog.h includes and every header of
 * the installed include directories (client/ and server/include/varlog). admin: the half
 * test_bad_input_admin checks (admin.h and the embedded server's), else the client's rest.
 * Fills up to cap paths; returns how many there are. */
size_t bi_public_headers(const char *source_dir, bool admin, char (*out)[512], size_t cap);

#endif
