/* The client the network benchmarks open: see bench_client.h. */
#include "bench_client.h"

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "metadata.h"

/* -X name=value pairs, as name, value, ..., NULL: the last pass of bench_client_open. */
#define X_PAIRS_MAX 32
static const char *x_pairs[2 * X_PAIRS_MAX + 1];
static size_t n_x_pairs;

static bool take_x_pair(const char *prog, const char *v)
{
    const char *eq = v ? strchr(v, '=') : NULL;
    if (!eq || eq == v || n_x_pairs >= X_PAIRS_MAX) {
        fprintf(stderr, "%s: -X wants name=value (at most %d)\n", prog, X_PAIRS_MAX);
        return false;
    }
    char *name = strndup(v, (size_t)(eq - v));
    if (!name)
        return false;
    x_pairs[2 * n_x_pairs] = name; /* the program's for its life */
    x_pairs[2 * n_x_pairs + 1] = eq + 1;
    n_x_pairs++;
    return true;
}

void bench_conf_tag(char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n_x_pairs && len < cap; i++) {
        int n = snprintf(out + len, cap - len, "/%s=%s", x_pairs[2 * i], x_pairs[2 * i + 1]);
        if (n < 0)
            break;
        len += (size_t)n;
    }
}

int bench_client_open(const char *address, const char *const *extra, varlog_client_t **out)
{
    varlog_conf_t *conf = varlog_conf_new();
    char err[512];
    if (!conf) {
        fprintf(stderr, "varlog_conf_new: out of memory\n");
        return -1;
    }
    const char *base[] = {"metadata.addresses",
                          address,
                          "metadata.refresh.interval.ms",
                          "0",
                          "log.level",
                          "err",
                          NULL};
    for (int pass = 0; pass < 3; pass++) {
        const char *const *kv = pass == 0 ? base : pass == 1 ? extra : x_pairs;
        for (size_t i = 0; kv && kv[i]; i += 2) {
            if (varlog_conf_set(conf, kv[i], kv[i + 1], err, sizeof(err)) != VARLOG_OK) {
                fprintf(stderr, "conf %s: %s\n", kv[i], err);
                varlog_conf_destroy(conf);
                return -1;
            }
        }
    }
    varlog_err_t rc = varlog_client_new(&conf, out, err, sizeof(err));
    if (rc != VARLOG_OK) {
        fprintf(stderr, "varlog_client_new: %s: %s\n", varlog_err_name(rc), err);
        varlog_conf_destroy(conf);
        return -1;
    }
    return 0;
}

bool bench_target_flag(int argc, char **argv, int *i, const bench_target_flags_t *f, bool *ok)
{
    const char *v = NULL;
    const char *flag = argv[*i];
    *ok = true;
    if (bench_flag(argc, argv, i, "X", true, &v)) {
        *ok = take_x_pair(argv[0], v);
        return true;
    }
    if (bench_flag(argc, argv, i, "inproc", false, &v)) {
        *f->inproc = true;
        return true;
    }
    if (bench_flag(argc, argv, i, "mr", true, &v)) {
        if ((*ok = v && v[0]))
            *f->cluster_address = v;
    } else if (bench_flag(argc, argv, i, "server", true, &v)) {
        if ((*ok = v && v[0]))
            *f->server_program = v;
    } else if (bench_flag(argc, argv, i, "topic", true, &v)) {
        *ok = v && bench_parse_int(argv[0], "topic", v, 1, f->topic_id);
    } else if (bench_flag(argc, argv, i, "logstream", true, &v)) {
        *ok = v && bench_parse_int(argv[0], "logstream", v, f->logstream_min, f->log_stream);
    } else if (f->size && bench_flag(argc, argv, i, "size", true, &v)) {
        int32_t size = 0;
        *ok = v && bench_parse_int(argv[0], "size", v, 1, &size);
        if (*ok && size > f->size_max) {
            fprintf(stderr, "%s: -size %s: at most %d\n", argv[0], v, f->size_max);
            *ok = false;
            return true;
        }
        if (*ok)
            *f->size = size;
    } else {
        return false;
    }
    if (!*ok && !v)
        fprintf(stderr, "%s: %s needs a value\n", argv[0], flag);
    return true;
}

int bench_primary_of(varlog_client_t *client, int32_t topic, int32_t log_stream, char *out,
                     size_t cap)
{
    md_view_t *v = md_current(client);
    const md_log_stream_t *ls = md_view_log_stream(v, topic, log_stream);
    int rc = -1;
    if (!ls)
        fprintf(stderr, "no log stream %d in topic %d\n", log_stream, topic);
    else if (!ls->primary)
        fprintf(stderr, "log stream %d of topic %d has no known primary\n", log_stream, topic);
    else if (snprintf(out, cap, "%s", ls->primary) < (int)cap)
        rc = 0;
    md_view_unref(v);
    return rc;
}
