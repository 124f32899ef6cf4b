#include "bad_input.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "varlog/conf.h"

static _Thread_local char broken_why[512];
static atomic_size_t rows_run;

varlog_err_t bi_broken(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(broken_why, sizeof(broken_why), fmt, ap);
    va_end(ap);
    return BI_BROKEN;
}

varlog_err_t bi_expect_str(const char *what, const char *got, const char *want)
{
    if (got && strcmp(got, want) == 0)
        return VARLOG_OK;
    return bi_broken("%s gave \"%s\", want \"%s\"", what, got ? got : "(NULL)", want);
}

static bool same_char(char a, char b)
{
    if (a == '_')
        a = ' ';
    if (b == '_')
        b = ' ';
    return tolower((unsigned char)a) == tolower((unsigned char)b);
}

static bool holds(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && same_char(hay[i], needle[i]))
            i++;
        if (i == n)
            return true;
    }
    return n == 0;
}

/* The thread's last error set to a text no row produces, so that a row that leaves it alone
 * is told apart from one that sets it. varlog_conf_set reads the conf it fails on only to
 * look the name up, so one configuration serves every thread. */
#define SENTINEL_NAME "bad-input.sentinel"
static varlog_conf_t *sentinel_conf;

void bi_init(void)
{
    if (!sentinel_conf)
        sentinel_conf = varlog_conf_new();
}

void bi_fini(void)
{
    varlog_conf_destroy(sentinel_conf);
    sentinel_conf = NULL;
}

static void set_sentinel(void)
{
    varlog_conf_set(sentinel_conf, SENTINEL_NAME, "1", NULL, 0);
}

static bool is_sentinel(const char *text)
{
    return strstr(text, SENTINEL_NAME) != NULL;
}

int bi_run(const char *context, const bi_row_t *rows, size_t n, bi_env_t *e)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const bi_row_t *r = &rows[i];
        set_sentinel();
        broken_why[0] = '\0';
        varlog_err_t rc = r->call(e);
        char text[512];
        snprintf(text, sizeof(text), "%s", varlog_last_error());
        atomic_fetch_add(&rows_run, 1);
        const char *why = NULL;
        if (rc == BI_BROKEN)
            why = broken_why;
        else if (rc != r->want && !(r->alt && rc == r->alt))
            why = "wrong code";
        else if (rc == VARLOG_OK && !is_sentinel(text))
            why = "a success replaced the last error";
        else if (rc != VARLOG_OK && r->text && !holds(text, r->text))
            why = "the last error does not say what is wrong";
        else if (rc != VARLOG_OK && r->text && is_sentinel(text))
            why = "the failure left the last error as it was";
        if (!why)
            continue;
        bad++;
        fprintf(stderr, "[%s] %s (%s): %s: got %s, want %s%s%s; last error \"%s\"%s%s%s\n", context,
                r->fn, r->input, why, rc == BI_BROKEN ? "BROKEN" : varlog_err_name(rc),
                varlog_err_name(r->want), r->alt ? " or " : "",
                r->alt ? varlog_err_name(r->alt) : "", text, r->text ? " (should hold \"" : "",
                r->text ? r->text : "", r->text ? "\")" : "");
    }
    return bad;
}

size_t bi_rows_run(void)
{
    return atomic_load(&rows_run);
}

static bool named_before(const bi_table_t *tables, size_t t, size_t i, const char *fn)
{
    for (size_t u = 0; u <= t; u++) {
        for (size_t j = 0; j < (u == t ? i : tables[u].n); j++) {
            if (strcmp(tables[u].rows[j].fn, fn) == 0)
                return true;
        }
    }
    return false;
}

size_t bi_count_functions(const bi_table_t *tables, size_t n_tables)
{
    size_t distinct = 0;
    for (size_t t = 0; t < n_tables; t++) {
        for (size_t i = 0; i < tables[t].n; i++)
            distinct += !named_before(tables, t, i, tables[t].rows[i].fn);
    }
    return distinct;
}

size_t bi_uncovered(const char *header_path, const bi_table_t *tables, size_t n_tables)
{
    FILE *f = fopen(header_path, "r");
    if (!f) {
        fprintf(stderr, "cannot read %s\n", header_path);
        return 1;
    }
    /* The name is the identifier before the first '(' after VARLOG_API. */
    static char text[1 << 17];
    size_t len = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[len] = '\0';
    size_t missing = 0;
    for (const char *p = strstr(text, "VARLOG_API "); p; p = strstr(p + 1, "VARLOG_API ")) {
        const char *paren = strchr(p, '('), *name = paren;
        while (name && name > p && (isalnum((unsigned char)name[-1]) || name[-1] == '_'))
            name--;
        if (!paren || paren - name >= 64 || paren == name)
            continue;
        char fn[64];
        snprintf(fn, sizeof(fn), "%.*s", (int)(paren - name), name);
        bool found = false;
        for (size_t t = 0; t < n_tables && !found; t++)
            found = named_before(tables, t, tables[t].n, fn);
        if (!found) {
            fprintf(stderr, "%s: %s has no row\n", header_path, fn);
            missing++;
        }
    }
    return missing;
}
