#include "bad_input.h"

#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The whole file, NUL-terminated, or NULL. */
static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *text = malloc(cap);
    while (text) {
        len += fread(text + len, 1, cap - 1 - len, f);
        if (len < cap - 1)
            break;
        char *more = realloc(text, cap * 2);
        if (!more) {
            free(text);
            text = NULL;
            break;
        }
        text = more;
        cap *= 2;
    }
    fclose(f);
    if (text)
        text[len] = '\0';
    return text;
}

/* Comments and preprocessor lines (with their continuations) become blanks, so that only
 * declarations are left: export.h's #define VARLOG_API and a VARLOG_API in a comment are not
 * declarations. */
static void blank_non_code(char *t)
{
    bool line_start = true;
    for (char *p = t; *p;) {
        if (p[0] == '/' && p[1] == '*') {
            char *end = strstr(p + 2, "*/");
            end = end ? end + 2 : p + strlen(p);
            for (; p < end; p++)
                if (*p != '\n')
                    *p = ' ';
            continue;
        }
        if (p[0] == '/' && p[1] == '/') {
            for (; *p && *p != '\n'; p++)
                *p = ' ';
            continue;
        }
        if (line_start && *p == '#') {
            for (; *p && !(*p == '\n' && p[-1] != '\\'); p++)
                if (*p != '\n')
                    *p = ' ';
            continue;
        }
        if (*p == '\n')
            line_start = true;
        else if (!isspace((unsigned char)*p))
            line_start = false;
        p++;
    }
}

static bool ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

size_t bi_uncovered(const char *header_path, const bi_table_t *tables, size_t n_tables)
{
    char *text = read_all(header_path);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", header_path);
        return 1;
    }
    blank_non_code(text);
    /* A declaration is VARLOG_API, its return type, the name and '(': the name is the
     * identifier before the first '(' after VARLOG_API, however long and whatever blanks
     * stand between it and the '('. One that does not read so counts as uncovered. */
    static const char api[] = "VARLOG_API";
    size_t missing = 0;
    for (const char *p = strstr(text, api); p; p = strstr(p + 1, api)) {
        if ((p > text && ident_char(p[-1])) || ident_char(p[sizeof(api) - 1]))
            continue;
        const char *paren = p + sizeof(api) - 1;
        while (*paren && *paren != '(' && *paren != ';')
            paren++;
        const char *end = paren;
        while (end > p && isspace((unsigned char)end[-1]))
            end--;
        const char *name = end;
        while (name > p && ident_char(name[-1]))
            name--;
        if (*paren != '(' || name == end || name == p) {
            fprintf(stderr,
                    "%s: a VARLOG_API declaration that does not read as a function: "
                    "\"%.60s\"\n",
                    header_path, p);
            missing++;
            continue;
        }
        char fn[256];
        if ((size_t)(end - name) >= sizeof(fn)) {
            fprintf(stderr, "%s: a function name of %zu characters\n", header_path,
                    (size_t)(end - name));
            missing++;
            continue;
        }
        snprintf(fn, sizeof(fn), "%.*s", (int)(end - name), name);
        bool found = false;
        for (size_t t = 0; t < n_tables && !found; t++)
            found = named_before(tables, t, tables[t].n, fn);
        if (!found) {
            fprintf(stderr, "%s: %s has no row\n", header_path, fn);
            missing++;
        }
    }
    free(text);
    return missing;
}

/* Adds dir/name to out unless a header of that name is there already. */
static void add_header(char (*out)[512], size_t cap, size_t *n, const char *dir, const char *name)
{
    for (size_t i = 0; i < *n && i < cap; i++) {
        const char *slash = strrchr(out[i], '/');
        if (strcmp(slash ? slash + 1 : out[i], name) == 0)
            return;
    }
    if (*n < cap)
        snprintf(out[*n], sizeof(out[0]), "%s/%s", dir, name);
    (*n)++;
}

static bool admin_side(const char *dir_kind, const char *name)
{
    return strcmp(dir_kind, "server") == 0 || strcmp(name, "admin.h") == 0;
}

size_t bi_public_headers(const char *source_dir, bool admin, char (*out)[512], size_t cap)
{
    char client_dir[512], server_dir[512], umbrella[600];
    snprintf(client_dir, sizeof(client_dir), "%s/client/include/varlog", source_dir);
    snprintf(server_dir, sizeof(server_dir), "%s/server/include/varlog", source_dir);
    snprintf(umbrella, sizeof(umbrella), "%s/varlog.h", client_dir);
    size_t n = 0;
    /* What varlog.h includes, where it lives; one it names that is missing stays in the
     * list, so that reading it fails the check. */
    char *text = read_all(umbrella);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", umbrella);
        add_header(out, cap, &n, client_dir, "varlog.h");
        return n;
    }
    for (const char *p = strstr(text, "#include"); p; p = strstr(p + 1, "#include")) {
        const char *q = p + strlen("#include");
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != '"' && *q != '<')
            continue;
        char close = *q == '"' ? '"' : '>';
        const char *end = strchr(q + 1, close);
        if (!end || strncmp(q + 1, "varlog/", 7) != 0 || end - (q + 8) >= 256)
            continue;
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)(end - (q + 8)), q + 8);
        char path[800];
        snprintf(path, sizeof(path), "%s/%s", server_dir, name);
        bool in_server = access(path, R_OK) == 0;
        if (admin_side(in_server ? "server" : "client", name) == admin)
            add_header(out, cap, &n, in_server ? server_dir : client_dir, name);
    }
    free(text);
    /* And every header installed (CMakeLists.txt installs both directories whole), so that a
     * header varlog.h does not include is checked too. */
    const char *dirs[2] = {client_dir, server_dir}, *kinds[2] = {"client", "server"};
    for (int d = 0; d < 2; d++) {
        DIR *dir = opendir(dirs[d]);
        struct dirent *e;
        while (dir && (e = readdir(dir)) != NULL) {
            size_t len = strlen(e->d_name);
            if (len > 2 && strcmp(e->d_name + len - 2, ".h") == 0 &&
                admin_side(kinds[d], e->d_name) == admin)
                add_header(out, cap, &n, dirs[d], e->d_name);
        }
        if (dir)
            closedir(dir);
    }
    return n;
}
