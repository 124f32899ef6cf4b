#include "vq/logger.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

bool vq_logger_info_enabled(const vq_logger_t *l)
{
    if (!l || !l->log)
        return false;
    return l->info_enabled ? l->info_enabled(l->ctx) : true;
}

void vq_log(const vq_logger_t *l, vq_log_level_t level, const char *fmt, ...)
{
    if (!l || !l->log)
        return;
    va_list ap;
    va_start(ap, fmt);
    l->log(l->ctx, level, fmt, ap);
    va_end(ap);
}

static void stderr_log(void *ctx, vq_log_level_t level, const char *fmt, va_list ap)
{
    (void)ctx;
    static const char *const names[] = {"INFO", "ERROR", "FATAL"};
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    time_t now = time(NULL);
    struct tm tm;
    char when[32];
    localtime_r(&now, &tm);
    strftime(when, sizeof when, "%Y/%m/%d %H:%M:%S", &tm);
    /* One call per line keeps concurrent lines whole. */
    fprintf(stderr, "%s: %s %s\n", names[level <= VQ_LOG_FATAL ? level : VQ_LOG_FATAL], when, msg);
}

static void discard_log(void *ctx, vq_log_level_t level, const char *fmt, va_list ap)
{
    (void)ctx;
    (void)level;
    (void)fmt;
    (void)ap;
}

static bool never(void *ctx)
{
    (void)ctx;
    return false;
}

static const vq_logger_t stderr_logger = {.log = stderr_log};
static const vq_logger_t discard_logger = {.log = discard_log, .info_enabled = never};

const vq_logger_t *vq_logger_stderr(void)
{
    return &stderr_logger;
}

const vq_logger_t *vq_logger_discard(void)
{
    return &discard_logger;
}
