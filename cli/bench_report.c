/* varlog-cli bench: the summary of a run, as text or one JSON object on stdout, and what a
 * failed run did, on stderr. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "bench.h"

static double per_s(uint64_t n, int64_t ns)
{
    return ns > 0 ? (double)n * 1e9 / (double)ns : 0;
}

static const double PCTS[] = {50, 90, 99, 99.9};
static const char *const PCT_NAMES[] = {"p50", "p90", "p99", "p99_9"};
static const char *const PCT_TEXT[] = {"p50", "p90", "p99", "p99.9"};

void bench_print_text(const cli_ctx_t *ctx, const bench_summary_t *s)
{
    const bench_opts_t *o = s->o;
    const bench_append_t *b = s->b;
    const phase_result_t *ar = s->ar, *sr = s->sr;
    varlog_err_t sub_err = s->sub_err;
    int64_t batch = s->batch, linger = s->linger, depth = s->depth;
    printf("bench: topic %d, %zu B records, %d producer%s, batch %" PRId64 ", linger %" PRId64
           " ms, depth %" PRId64,
           o->topic, o->size, o->producers, o->producers == 1 ? "" : "s", batch, linger, depth);
    if (o->rate > 0)
        printf(", rate limit %.0f/s", o->rate);
    printf("%s\n", s->interrupted ? " (interrupted: the figures cover what ran)" : "");
    if (o->mode & MODE_APPEND) {
        uint64_t sent = atomic_load(&((bench_append_t *)b)->sent);
        uint64_t failed = atomic_load(&((bench_append_t *)b)->failed);
        printf("append:    %" PRIu64 " of %" PRIu64 " records appended in %.2f s: %.0f records/s, "
               "%.2f MB/s\n",
               ar->records, sent, (double)ar->elapsed_ns / 1e9, per_s(ar->records, ar->elapsed_ns),
               per_s(ar->bytes, ar->elapsed_ns) / 1e6);
        printf("errors:    %" PRIu64 " (NOT_APPENDED %" PRIu64 ", MAYBE_APPENDED %" PRIu64 ")",
               failed, b->failed_by_outcome[VARLOG_NOT_APPENDED],
               b->failed_by_outcome[VARLOG_MAYBE_APPENDED]);
        for (size_t i = 0; i < b->nkinds; i++)
            printf("%s%s %s %" PRIu64, i ? ", " : ": ", varlog_outcome_name(b->kinds[i].outcome),
                   varlog_err_name(b->kinds[i].err), b->kinds[i].count);
        printf("\n");
        if (b->first_errtext[0])
            printf("first error: %s\n", b->first_errtext);
        printf("queue full: %" PRIu64 "\n", atomic_load(&((bench_append_t *)b)->queue_full));
        printf("CPU:       %.2f us per record (the process's%s)\n",
               ar->records ? ar->cpu_s * 1e6 / (double)ar->records : 0.0,
               ctx->mr ? "" : ", embedded server included");
        printf("latency:  ");
        for (size_t i = 0; i < sizeof PCTS / sizeof PCTS[0]; i++)
            printf(" %s %.1f us,", PCT_TEXT[i], (double)vhist_percentile(&b->lat, PCTS[i]) / 1e3);
        printf(" max %.1f us (append call to callback, +-%.1f %%)\n",
               (double)vhist_max(&b->lat) / 1e3, vhist_relative_error(&b->lat) * 100);
    }
    if ((o->mode & MODE_SUBSCRIBE) && !s->sub_ran) {
        printf("subscribe: not run (interrupted before it began)\n");
    } else if (o->mode & MODE_SUBSCRIBE) {
        printf("subscribe: %" PRIu64 " entries read in %.2f s: %.0f entries/s, %.2f MB/s, "
               "%.2f us CPU per entry%s%s\n",
               sr->records, (double)sr->elapsed_ns / 1e9, per_s(sr->records, sr->elapsed_ns),
               per_s(sr->bytes, sr->elapsed_ns) / 1e6,
               sr->records ? sr->cpu_s * 1e6 / (double)sr->records : 0.0,
               sub_err != VARLOG_OK ? ", ended with " : "",
               sub_err != VARLOG_OK ? varlog_err_name(sub_err) : "");
    }
}

int bench_print_json(const cli_ctx_t *ctx, const bench_summary_t *sm)
{
    const bench_opts_t *o = sm->o;
    const bench_append_t *b = sm->b;
    const phase_result_t *ar = sm->ar, *sr = sm->sr;
    varlog_err_t sub_err = sm->sub_err;
    int64_t batch = sm->batch, linger = sm->linger, depth = sm->depth;
    static const char *const modes[] = {"", "append", "subscribe", "both"};
    cJSON *root = cJSON_CreateObject();
    if (!root)
        return CLI_EXIT_FAIL;
    cJSON_AddStringToObject(root, "mode", modes[o->mode]);
    cJSON_AddStringToObject(root, "cluster", ctx->mr ? ctx->mr : "embedded");
    cJSON_AddNumberToObject(root, "topic", o->topic);
    cJSON_AddNumberToObject(root, "record_size", (double)o->size);
    cJSON_AddNumberToObject(root, "producers", o->producers);
    cJSON_AddNumberToObject(root, "batch_max_records", (double)batch);
    cJSON_AddNumberToObject(root, "linger_ms", (double)linger);
    cJSON_AddNumberToObject(root, "pipeline_depth", (double)depth);
    cJSON_AddNumberToObject(root, "rate_limit", o->rate);
    cJSON_AddBoolToObject(root, "interrupted", sm->interrupted);
    cJSON_AddBoolToObject(root, "ok", sm->ok);
    if (o->mode & MODE_APPEND) {
        bench_append_t *bm = (bench_append_t *)b;
        cJSON *a = cJSON_AddObjectToObject(root, "append");
        cJSON_AddNumberToObject(a, "sent", (double)atomic_load(&bm->sent));
        cJSON_AddNumberToObject(a, "appended", (double)ar->records);
        uint64_t sent = atomic_load(&bm->sent), failed = atomic_load(&bm->failed);
        cJSON_AddNumberToObject(a, "failed", (double)failed);
        /* accepted calls whose callback did not come before the flush gave up */
        cJSON_AddNumberToObject(a, "unsettled",
                                sent > ar->records + failed ? (double)(sent - ar->records - failed)
                                                            : 0.0);
        varlog_err_t refused = (varlog_err_t)atomic_load(&bm->refused);
        if (refused != VARLOG_OK)
            cJSON_AddStringToObject(a, "refused", varlog_err_name(refused));
        else
            cJSON_AddNullToObject(a, "refused");
        cJSON_AddNumberToObject(a, "bytes", (double)ar->bytes);
        cJSON_AddNumberToObject(a, "elapsed_s", (double)ar->elapsed_ns / 1e9);
        cJSON_AddNumberToObject(a, "records_per_s", per_s(ar->records, ar->elapsed_ns));
        cJSON_AddNumberToObject(a, "mb_per_s", per_s(ar->bytes, ar->elapsed_ns) / 1e6);
        cJSON *errs = cJSON_AddObjectToObject(a, "errors");
        cJSON_AddNumberToObject(errs, "NOT_APPENDED",
                                (double)b->failed_by_outcome[VARLOG_NOT_APPENDED]);
        cJSON_AddNumberToObject(errs, "MAYBE_APPENDED",
                                (double)b->failed_by_outcome[VARLOG_MAYBE_APPENDED]);
        cJSON *kinds = cJSON_AddArrayToObject(errs, "by_error");
        for (size_t i = 0; i < b->nkinds; i++) {
            cJSON *k = cJSON_CreateObject();
            cJSON_AddStringToObject(k, "outcome", varlog_outcome_name(b->kinds[i].outcome));
            cJSON_AddStringToObject(k, "error", varlog_err_name(b->kinds[i].err));
            cJSON_AddNumberToObject(k, "records", (double)b->kinds[i].count);
            cJSON_AddItemToArray(kinds, k);
        }
        /* failures of (outcome, error) pairs beyond the MAX_ERR_KINDS listed */
        cJSON_AddNumberToObject(errs, "other", (double)b->other_kinds);
        if (b->first_errtext[0])
            cJSON_AddStringToObject(errs, "first", b->first_errtext);
        cJSON_AddNumberToObject(a, "queue_full", (double)atomic_load(&bm->queue_full));
        cJSON_AddNumberToObject(a, "cpu_us_per_record",
                                ar->records ? ar->cpu_s * 1e6 / (double)ar->records : 0.0);
        cJSON_AddBoolToObject(a, "cpu_includes_server", ctx->mr == NULL);
        cJSON *l = cJSON_AddObjectToObject(a, "latency_us");
        for (size_t i = 0; i < sizeof PCTS / sizeof PCTS[0]; i++)
            cJSON_AddNumberToObject(l, PCT_NAMES[i],
                                    (double)vhist_percentile(&b->lat, PCTS[i]) / 1e3);
        cJSON_AddNumberToObject(l, "max", (double)vhist_max(&b->lat) / 1e3);
        cJSON_AddNumberToObject(l, "min", (double)vhist_min(&b->lat) / 1e3);
        cJSON_AddNumberToObject(l, "mean", vhist_mean(&b->lat) / 1e3);
        cJSON_AddNumberToObject(l, "count", (double)vhist_count(&b->lat));
        cJSON_AddNumberToObject(l, "relative_error", vhist_relative_error(&b->lat));
    }
    if ((o->mode & MODE_SUBSCRIBE) && !sm->sub_ran) {
        cJSON_AddNullToObject(root, "subscribe"); /* interrupted before it began */
    } else if (o->mode & MODE_SUBSCRIBE) {
        cJSON *s = cJSON_AddObjectToObject(root, "subscribe");
        cJSON_AddNumberToObject(s, "entries", (double)sr->records);
        cJSON_AddNumberToObject(s, "bytes", (double)sr->bytes);
        cJSON_AddNumberToObject(s, "elapsed_s", (double)sr->elapsed_ns / 1e9);
        cJSON_AddNumberToObject(s, "entries_per_s", per_s(sr->records, sr->elapsed_ns));
        cJSON_AddNumberToObject(s, "mb_per_s", per_s(sr->bytes, sr->elapsed_ns) / 1e6);
        cJSON_AddNumberToObject(s, "cpu_us_per_entry",
                                sr->records ? sr->cpu_s * 1e6 / (double)sr->records : 0.0);
        if (sub_err != VARLOG_OK)
            cJSON_AddStringToObject(s, "error", varlog_err_name(sub_err));
        else
            cJSON_AddNullToObject(s, "error");
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text)
        return CLI_EXIT_FAIL;
    printf("%s\n", text);
    cJSON_free(text);
    return CLI_EXIT_OK;
}

void bench_print_failure(const cli_ctx_t *ctx, const bench_summary_t *s)
{
    const bench_opts_t *o = s->o;
    const bench_append_t *b = s->b;
    fprintf(stderr, "%s %s: failed", ctx->prog, ctx->cmd);
    if (o->mode & MODE_APPEND) {
        fprintf(stderr, "; %" PRIu64 " of %" PRIu64 " records appended", s->ar->records,
                atomic_load(&((bench_append_t *)b)->sent));
        uint64_t failed = atomic_load(&((bench_append_t *)b)->failed);
        if (failed)
            fprintf(stderr,
                    ", %" PRIu64 " failed (NOT_APPENDED %" PRIu64 ", MAYBE_APPENDED %" PRIu64 ")",
                    failed, b->failed_by_outcome[VARLOG_NOT_APPENDED],
                    b->failed_by_outcome[VARLOG_MAYBE_APPENDED]);
        for (size_t i = 0; i < b->nkinds; i++)
            fprintf(stderr, "%s%s %s %" PRIu64, i ? ", " : ": ",
                    varlog_outcome_name(b->kinds[i].outcome), varlog_err_name(b->kinds[i].err),
                    b->kinds[i].count);
        if (b->first_errtext[0])
            fprintf(stderr, "; first error: %s", b->first_errtext);
    }
    if ((o->mode & MODE_SUBSCRIBE) && s->sub_ran)
        fprintf(stderr, "; %" PRIu64 " entries read%s%s", s->sr->records,
                s->sub_err != VARLOG_OK ? ", ended with " : "",
                s->sub_err != VARLOG_OK ? varlog_err_name(s->sub_err) : "");
    fputc('\n', stderr);
}
