/* docs/monitoring against what reads it and what it reads: the alerting rules pass
 * `promtool check rules` and their unit tests (`promtool test rules` on
 * varlog-client-alerts.test.yml); the dashboard's expressions parse as PromQL (promtool check
 * rules on them as recording rules); and every metric an alert or a panel queries is a family
 * a real client exports: the `# TYPE` lines of varlog_stats_prometheus of a client that
 * appended and subscribed against an embedded server (a histogram x provides x_bucket, x_sum
 * and x_count). Skipped, saying how to enable it, where promtool is missing; under CI=true that
 * fails instead. Label prometheus: `make test-prometheus`. */
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "metrics_test_util.h"
#include "test_support.h"
#include "varlog/server.h"
#include "varlog/varlog.h"

#define ALERTS VARLOG_MONITORING_DIR "/varlog-client-alerts.yml"
#define ALERTS_TEST VARLOG_MONITORING_DIR "/varlog-client-alerts.test.yml"
#define DASHBOARD VARLOG_MONITORING_DIR "/varlog-client-dashboard.json"

/* The prefixes of the names checked: the client's own families and the messaging
 * conventions' (other identifiers are PromQL's functions and keywords, or labels). */
static const char *const PREFIXES[] = {"varlog_client_", "messaging_"};

typedef struct fixture {
    const char *promtool;
    char promtool_buf[512];
    char dir[512];
    bool keep; /* a failure: the scratch directory stays for the reader */
} fixture_t;

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->promtool =
        metrics_find_program("PROMTOOL", "promtool", f->promtool_buf, sizeof f->promtool_buf);
    metrics_workdir(f->dir, sizeof f->dir, "monitoring");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    if (f->keep)
        fprintf(stderr, "what the test ran and read: %s\n", f->dir);
    else
        metrics_workdir_remove(f->dir);
    free(f);
    return 0;
}

static void require_promtool(const fixture_t *f)
{
    if (!f->promtool)
        metrics_skip_or_fail("promtool not found (PATH, or $PROMTOOL)");
}

static char *read_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        fail_msg("cannot open %s", path);
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len - 1, fp)) > 0) {
        len += n;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    fclose(fp);
    buf[len] = '\0';
    return buf;
}

/* promtool with args: exit status 0 and its output holding want, else the test fails with
 * its output. Returns the output (malloc'ed). */
static char *expect_promtool(fixture_t *f, const char *what, const char *const *args,
                             const char *want)
{
    const char *argv[8] = {f->promtool};
    size_t n = 1;
    for (; args[n - 1]; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    char *out = NULL;
    int st = mproc_run(f->dir, what, argv, "", 60000, &out);
    printf("promtool %s %s: exit status %d\n%s", args[0], args[1], st, out);
    if (st != 0 || !strstr(out, want)) {
        f->keep = true;
        fail_msg("promtool %s %s: exit status %d, output:\n%s", args[0], args[1], st, out);
    }
    return out;
}

/* ---- the expressions ------------------------------------------------------------------ */

typedef struct names {
    char **v;
    const char **where;
    size_t n, cap;
} names_t;

static void names_add(names_t *s, const char *name, size_t len, const char *where)
{
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->v[i]) == len && strncmp(s->v[i], name, len) == 0)
            return;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        s->where = realloc(s->where, s->cap * sizeof *s->where);
        assert_true(s->v && s->where);
    }
    s->v[s->n] = strndup(name, len);
    s->where[s->n++] = where;
}

static bool names_has(const names_t *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return true;
    return false;
}

static void names_free(names_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    free(s->where);
}

static bool is_ident_start(char c)
{
    return isalpha((unsigned char)c) || c == '_' || c == ':';
}

static bool is_ident(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == ':';
}

static bool has_prefix(const char *s, size_t len)
{
    for (size_t i = 0; i < sizeof PREFIXES / sizeof PREFIXES[0]; i++) {
        size_t pl = strlen(PREFIXES[i]);
        if (len > pl && strncmp(s, PREFIXES[i], pl) == 0)
            return true;
    }
    return false;
}

/* The index just past the bracket that closes the one at s[i] (open/close), skipping
 * quoted strings. */
static size_t skip_group(const char *s, size_t i, size_t end, char open, char close)
{
    int depth = 0;
    for (; i < end; i++) {
        if (s[i] == '"' || s[i] == '\'' || s[i] == '`') {
            char q = s[i];
            for (i++; i < end && s[i] != q; i++)
                if (s[i] == '\\' && q != '`')
                    i++;
        } else if (s[i] == open) {
            depth++;
        } else if (s[i] == close && --depth == 0) {
            return i + 1;
        }
    }
    return end;
}

/* The metric names of s[0..end) with one of PREFIXES, added to out. A PromQL (and Grafana)
 * expression's identifiers are metric names unless they are label names (inside {...}, in
 * by/without/on/ignoring/group_left/group_right (...)), functions (followed by '('),
 * durations ([5m]), numbers, Grafana variables ($job, ${DS}) or label_values' last argument. */
static void scan_expr(const char *s, size_t end, const char *where, names_t *out)
{
    static const char *const LABEL_LISTS[] = {"by",       "without",    "on",
                                              "ignoring", "group_left", "group_right"};
    size_t i = 0;
    while (i < end) {
        char c = s[i];
        if (c == '"' || c == '\'' || c == '`') {
            for (i++; i < end && s[i] != c; i++)
                if (s[i] == '\\' && c != '`')
                    i++;
            i++;
        } else if (c == '{') {
            i = skip_group(s, i, end, '{', '}'); /* label matchers */
        } else if (c == '[') {
            i = skip_group(s, i, end, '[', ']'); /* a range or subquery */
        } else if (c == '$') {
            i++;
            if (i < end && s[i] == '{')
                i = skip_group(s, i, end, '{', '}');
            while (i < end && is_ident(s[i]))
                i++;
        } else if (isdigit((unsigned char)c) ||
                   (c == '.' && i + 1 < end && isdigit((unsigned char)s[i + 1]))) {
            while (i < end && (is_ident(s[i]) || s[i] == '.'))
                i++;
        } else if (is_ident_start(c)) {
            size_t b = i;
            while (i < end && is_ident(s[i]))
                i++;
            size_t len = i - b;
            size_t j = i;
            while (j < end && isspace((unsigned char)s[j]))
                j++;
            bool call = j < end && s[j] == '(';
            bool label_list = false;
            for (size_t k = 0; k < sizeof LABEL_LISTS / sizeof LABEL_LISTS[0]; k++)
                if (strlen(LABEL_LISTS[k]) == len && strncmp(s + b, LABEL_LISTS[k], len) == 0)
                    label_list = true;
            if (label_list && call) {
                i = skip_group(s, j, end, '(', ')');
            } else if (call && len == 12 && strncmp(s + b, "label_values", 12) == 0) {
                /* Grafana's label_values([selector,] label): the selector is scanned */
                size_t close = skip_group(s, j, end, '(', ')');
                size_t comma = 0;
                int depth = 0;
                for (size_t k = j; k < close; k++) {
                    if (s[k] == '(' || s[k] == '{')
                        depth++;
                    else if (s[k] == ')' || s[k] == '}')
                        depth--;
                    else if (s[k] == ',' && depth == 1)
                        comma = k;
                }
                if (comma)
                    scan_expr(s + j + 1, comma - j - 1, where, out);
                i = close;
            } else if (!call && has_prefix(s + b, len)) {
                names_add(out, s + b, len, where);
            }
        } else {
            i++;
        }
    }
}

/* The expr: values of a rules file: `expr: TEXT` on one line, or a block scalar (`expr: |`,
 * `>`, with - or +) of the lines indented deeper. Returns how many. */
static int rules_exprs(const char *yaml, names_t *out, char ***exprs_out)
{
    int count = 0;
    char **exprs = NULL;
    for (const char *l = yaml; *l;) {
        const char *nl = strchr(l, '\n');
        size_t llen = nl ? (size_t)(nl - l) : strlen(l);
        size_t ind = 0;
        while (ind < llen && l[ind] == ' ')
            ind++;
        if (llen - ind >= 5 && strncmp(l + ind, "expr:", 5) == 0) {
            const char *v = l + ind + 5;
            while (*v == ' ')
                v++;
            size_t vlen = (size_t)(l + llen - v);
            char *text = NULL;
            if (vlen > 0 && (*v == '|' || *v == '>')) {
                size_t cap = 1, tl = 0;
                text = calloc(1, cap);
                const char *p = nl ? nl + 1 : l + llen;
                while (*p) {
                    const char *pn = strchr(p, '\n');
                    size_t plen = pn ? (size_t)(pn - p) : strlen(p);
                    size_t pi = 0;
                    while (pi < plen && p[pi] == ' ')
                        pi++;
                    if (pi < plen && pi <= ind)
                        break; /* a line indented no deeper ends the block */
                    text = realloc(text, cap += plen + 1);
                    memcpy(text + tl, p, plen);
                    tl += plen;
                    text[tl++] = '\n';
                    text[tl] = '\0';
                    p = pn ? pn + 1 : p + plen;
                }
            } else {
                if (vlen >= 2 && (*v == '"' || *v == '\'') && v[vlen - 1] == *v) {
                    v++;
                    vlen -= 2;
                }
                text = strndup(v, vlen);
            }
            assert_non_null(text);
            scan_expr(text, strlen(text), "varlog-client-alerts.yml", out);
            exprs = realloc(exprs, (size_t)(count + 1) * sizeof *exprs);
            exprs[count++] = text;
        }
        l = nl ? nl + 1 : l + llen;
    }
    *exprs_out = exprs;
    return count;
}

static int count_lines_starting(const char *text, const char *word)
{
    int n = 0;
    for (const char *l = text; *l;) {
        const char *p = l;
        while (*p == ' ')
            p++;
        if (strncmp(p, "- ", 2) == 0)
            p += 2;
        if (strncmp(p, word, strlen(word)) == 0)
            n++;
        const char *nl = strchr(l, '\n');
        l = nl ? nl + 1 : l + strlen(l);
    }
    return n;
}

/* Every query of the dashboard: targets' expr (panels, and panels of rows) and the query
 * variables' queries. Appends each to *exprs. */
static void dashboard_exprs(const cJSON *node, names_t *names, char ***exprs, int *n)
{
    if (cJSON_IsObject(node)) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(node, "expr");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(node, "type");
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(node, "query");
        const char *text = cJSON_IsString(e) ? e->valuestring : NULL;
        bool var = cJSON_IsString(type) && strcmp(type->valuestring, "query") == 0;
        if (cJSON_IsString(e)) {
            *exprs = realloc(*exprs, (size_t)(*n + 1) * sizeof **exprs);
            (*exprs)[(*n)++] = strdup(text);
        }
        if (var && cJSON_IsObject(q))
            q = cJSON_GetObjectItemCaseSensitive(q, "query");
        if (var && cJSON_IsString(q))
            scan_expr(q->valuestring, strlen(q->valuestring), "varlog-client-dashboard.json",
                      names);
        if (text)
            scan_expr(text, strlen(text), "varlog-client-dashboard.json", names);
    }
    const cJSON *child;
    cJSON_ArrayForEach(child, node)
    {
        dashboard_exprs(child, names, exprs, n);
    }
}

/* ---- the exposition ------------------------------------------------------------------- */

static void on_appended(const varlog_append_result_t *res, void *opaque)
{
    (void)opaque;
    assert_int_equal(res->err, VARLOG_OK);
}

/* The families of a real client's exposition: an embedded server, one record appended with
 * varlog_append, one through an appender, a subscription that read them and is still open. */
static char *client_exposition(void)
{
    varlog_server_opts_t opts = {.topics = 1, .log_streams_per_topic = 2};
    varlog_server_t *srv = NULL;
    assert_int_equal(varlog_server_start(&opts, &srv), VARLOG_OK);
    varlog_conf_t *conf = varlog_conf_new();
    char err[512];
    assert_int_equal(
        varlog_conf_set(conf, "metadata.addresses", varlog_server_address(srv), err, sizeof err),
        VARLOG_OK);
    assert_int_equal(varlog_conf_set(conf, "subscribe.stage.timing", "true", err, sizeof err),
                     VARLOG_OK);
    assert_int_equal(varlog_conf_set(conf, "log.level", "err", err, sizeof err), VARLOG_OK);
    varlog_client_t *client = NULL;
    if (varlog_client_new(&conf, &client, err, sizeof err) != VARLOG_OK)
        fail_msg("varlog_client_new: %s", err);
    varlog_record_t rec = {.data = "x", .len = 1};
    varlog_entry_meta_t meta;
    varlog_outcome_t outcome;
    assert_int_equal(varlog_append(client, 1, &rec, 1, 10000, &meta, &outcome), VARLOG_OK);
    varlog_appender_t *app = NULL;
    assert_int_equal(varlog_appender_new(client, 1, 0, &app), VARLOG_OK);
    assert_int_equal(varlog_appender_append(app, &rec, 1, -1, on_appended, NULL), VARLOG_OK);
    size_t still = 0;
    assert_int_equal(varlog_appender_flush(app, 10000, &still), VARLOG_OK);
    varlog_subscription_t *sub = NULL;
    assert_int_equal(varlog_subscribe_iter(client, 1, 1, UINT64_MAX, &sub), VARLOG_OK);
    varlog_entry_t e;
    for (int i = 0; i < 2; i++)
        assert_int_equal(varlog_subscription_next(sub, 10000, &e), VARLOG_OK);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(varlog_stats_prometheus(client, &text, &len), VARLOG_OK);
    char *copy = strdup(text);
    varlog_stats_prometheus_free(text);
    varlog_subscription_close(&sub);
    varlog_appender_close(&app, 10000);
    varlog_client_destroy(client);
    varlog_server_destroy(srv);
    assert_non_null(copy);
    return copy;
}

/* The names a scrape of exposition offers: each `# TYPE name kind` family, and for a
 * histogram (summary) its _bucket (quantile), _sum and _count series. */
static void exported_names(const char *exposition, names_t *out)
{
    for (const char *l = exposition; *l;) {
        const char *nl = strchr(l, '\n');
        size_t llen = nl ? (size_t)(nl - l) : strlen(l);
        if (llen > 7 && strncmp(l, "# TYPE ", 7) == 0) {
            const char *name = l + 7;
            const char *sp = memchr(name, ' ', llen - 7);
            assert_non_null(sp);
            size_t nlen = (size_t)(sp - name);
            names_add(out, name, nlen, "exposition");
            if (strncmp(sp + 1, "histogram", 9) == 0 || strncmp(sp + 1, "summary", 7) == 0) {
                static const char *const SUFFIXES[] = {"_bucket", "_sum", "_count"};
                for (size_t k = 0; k < 3; k++) {
                    char full[256];
                    snprintf(full, sizeof full, "%.*s%s", (int)nlen, name, SUFFIXES[k]);
                    names_add(out, full, strlen(full), "exposition");
                }
            }
        }
        l = nl ? nl + 1 : l + llen;
    }
}

/* ---- the tests ------------------------------------------------------------------------ */

static void test_alerts_pass_promtool_check(void **state)
{
    fixture_t *f = *state;
    require_promtool(f);
    const char *args[] = {"check", "rules", ALERTS, NULL};
    char *out = expect_promtool(f, "check-rules", args, "SUCCESS");
    /* every rule the file holds is one this test reads the expression of */
    char *yaml = read_file(ALERTS);
    names_t names = {0};
    char **exprs = NULL;
    int n = rules_exprs(yaml, &names, &exprs);
    int rules = count_lines_starting(yaml, "alert:") + count_lines_starting(yaml, "record:");
    char want[64];
    snprintf(want, sizeof want, "SUCCESS: %d rules found", rules);
    if (n != rules || !strstr(out, want))
        fail_msg("%d expressions read, %d rules in the file, promtool said: %s", n, rules, out);
    for (int i = 0; i < n; i++)
        free(exprs[i]);
    free(exprs);
    names_free(&names);
    free(yaml);
    free(out);
}

static void test_alerts_unit_tests(void **state)
{
    fixture_t *f = *state;
    require_promtool(f);
    const char *args[] = {"test", "rules", ALERTS_TEST, NULL};
    free(expect_promtool(f, "test-rules", args, "SUCCESS"));
}

/* The dashboard's queries, Grafana's variables given values, as recording rules: promtool
 * parses each as PromQL. */
static void test_dashboard_queries_parse(void **state)
{
    fixture_t *f = *state;
    require_promtool(f);
    char *json = read_file(DASHBOARD);
    cJSON *root = cJSON_Parse(json);
    if (!root)
        fail_msg("%s is not JSON", DASHBOARD);
    names_t names = {0};
    char **exprs = NULL;
    int n = 0;
    dashboard_exprs(root, &names, &exprs, &n);
    assert_true(n > 10);
    static const char *const VARS[][2] = {{"$__rate_interval", "5m"},
                                          {"$__range", "1h"},
                                          {"$__interval", "1m"},
                                          {"$job", ".*"},
                                          {"$instance", ".*"}};
    char path[600];
    snprintf(path, sizeof path, "%s/dashboard-rules.yml", f->dir);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fprintf(fp, "groups:\n  - name: dashboard\n    rules:\n");
    for (int i = 0; i < n; i++) {
        /* the expression with the variables replaced, as a JSON string (a YAML double-quoted
         * scalar) */
        size_t cap = strlen(exprs[i]) * 2 + 64, o = 0;
        char *x = malloc(cap);
        assert_non_null(x);
        for (const char *p = exprs[i]; *p;) {
            bool replaced = false;
            for (size_t v = 0; v < sizeof VARS / sizeof VARS[0]; v++) {
                size_t vl = strlen(VARS[v][0]);
                if (strncmp(p, VARS[v][0], vl) == 0 && !is_ident(p[vl])) {
                    o += (size_t)snprintf(x + o, cap - o, "%s", VARS[v][1]);
                    p += vl;
                    replaced = true;
                    break;
                }
            }
            if (!replaced)
                x[o++] = *p++;
        }
        x[o] = '\0';
        if (strchr(x, '$'))
            fail_msg("a Grafana variable this test does not know in: %s", exprs[i]);
        cJSON *s = cJSON_CreateString(x);
        char *quoted = cJSON_PrintUnformatted(s);
        fprintf(fp, "      - record: dashboard:expr_%d\n        expr: %s\n", i, quoted);
        cJSON_free(quoted);
        cJSON_Delete(s);
        free(x);
        free(exprs[i]);
    }
    fclose(fp);
    free(exprs);
    const char *args[] = {"check", "rules", path, NULL};
    char want[64];
    snprintf(want, sizeof want, "SUCCESS: %d rules found", n);
    free(expect_promtool(f, "check-dashboard", args, want));
    names_free(&names);
    cJSON_Delete(root);
    free(json);
}

/* Every varlog_client_* and messaging_* name an alert or a panel queries is exported. */
static void test_queried_metrics_are_exported(void **state)
{
    fixture_t *f = *state;
    names_t used = {0};
    char *yaml = read_file(ALERTS);
    char **exprs = NULL;
    int n = rules_exprs(yaml, &used, &exprs);
    assert_true(n > 0);
    for (int i = 0; i < n; i++)
        free(exprs[i]);
    free(exprs);
    free(yaml);
    char *json = read_file(DASHBOARD);
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    exprs = NULL;
    n = 0;
    dashboard_exprs(root, &used, &exprs, &n);
    for (int i = 0; i < n; i++)
        free(exprs[i]);
    free(exprs);
    cJSON_Delete(root);
    free(json);

    char *exposition = client_exposition();
    names_t exported = {0};
    exported_names(exposition, &exported);
    char path[600];
    snprintf(path, sizeof path, "%s/exposition.txt", f->dir);
    FILE *fp = fopen(path, "w");
    if (fp) {
        fputs(exposition, fp);
        fclose(fp);
    }
    printf("%zu names queried by docs/monitoring, %zu families (with histogram series) "
           "exported\n",
           used.n, exported.n);
    for (size_t i = 0; i < used.n; i++)
        printf("  %s %s (%s)\n", names_has(&exported, used.v[i]) ? "exported" : "MISSING ",
               used.v[i], used.where[i]);
    char missing[4096] = "";
    size_t nmissing = 0, o = 0;
    for (size_t i = 0; i < used.n; i++) {
        if (names_has(&exported, used.v[i]))
            continue;
        nmissing++;
        int w = snprintf(missing + o, sizeof missing - o, "\n  %s (%s)", used.v[i], used.where[i]);
        if (w > 0 && (size_t)w < sizeof missing - o)
            o += (size_t)w;
    }
    if (nmissing) {
        f->keep = true;
        fail_msg("%zu metric names queried by docs/monitoring are not families the client "
                 "exports (varlog_stats_prometheus' # TYPE lines):%s",
                 nmissing, missing);
    }
    names_free(&exported);
    names_free(&used);
    free(exposition);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_alerts_pass_promtool_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alerts_unit_tests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dashboard_queries_parse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queried_metrics_are_exported, setup, teardown),
    };
    return metrics_main_result(cmocka_run_group_tests(tests, NULL, NULL));
}
