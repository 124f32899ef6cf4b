/*
 * The configuration: parsing, range checks, get and defaults, all driven by the property
 * table (conf_table.c). Defaults are written as strings and go through the same parser as
 * user values, so a default outside its own range cannot go unnoticed.
 */
#include "conf_internal.h"
#include "conf_table.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "errtext.h"

static void *field_of(varlog_conf_t *conf, const conf_property_t *p)
{
    return (char *)conf + p->offset;
}

static const void *cfield_of(const varlog_conf_t *conf, const conf_property_t *p)
{
    return (const char *)conf + p->offset;
}

/* ---- parsing ----------------------------------------------------------------------------- */

enum int_parse { INT_OK, INT_NOT_INT, INT_OVERFLOW };

/* Strict decimal: an optional '-', then digits and nothing else (no spaces, no '+', no 0x).
 * strtoll would accept leading spaces and a '+' and needs errno juggling for overflow. */
static enum int_parse parse_int64(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (i < len && s[i] == '-') {
        neg = true;
        i++;
    }
    if (i == len)
        return INT_NOT_INT;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t mag = 0;
    bool overflow = false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return INT_NOT_INT;
        unsigned d = (unsigned)(s[i] - '0');
        if (mag > (limit - d) / 10)
            overflow = true; /* keep scanning: "99999999999999999999x" is not an integer */
        else
            mag = mag * 10 + d;
    }
    if (overflow)
        return INT_OVERFLOW;
    if (neg)
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    else
        *out = (int64_t)mag;
    return INT_OK;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* Narrows [*s, *s + *len) to its part without surrounding spaces. */
static void trim(const char **s, size_t *len)
{
    while (*len > 0 && is_space((*s)[0])) {
        (*s)++;
        (*len)--;
    }
    while (*len > 0 && is_space((*s)[*len - 1]))
        (*len)--;
}

static bool all_space(const char *s)
{
    while (is_space(*s))
        s++;
    return *s == '\0';
}

/* A value quoted in an error text is cut at SHOWN_MAX bytes (then "..."): a 64 KiB value
 * would otherwise fill the whole text and push out what is wrong with it. Use with "%.*s%s". */
#define SHOWN_MAX 64
#define SHOWN(s, len)                                                                              \
    (int)((len) > SHOWN_MAX ? SHOWN_MAX : (len)), (s), (len) > SHOWN_MAX ? "..." : ""

/* A size in bytes may end in k, m or g (x1024 each), the one rule varlog-cli and
 * varlog-server state for sizes: "4m" is 4194304. */
static enum int_parse parse_size(const char *s, size_t len, int64_t *out)
{
    int shift = 0;
    if (len > 1) {
        switch (s[len - 1]) {
        case 'k':
        case 'K':
            shift = 10;
            break;
        case 'm':
        case 'M':
            shift = 20;
            break;
        case 'g':
        case 'G':
            shift = 30;
            break;
        default:
            break;
        }
    }
    if (shift == 0)
        return parse_int64(s, len, out);
    int64_t v = 0;
    enum int_parse r = parse_int64(s, len - 1, &v);
    if (r != INT_OK)
        return r;
    if (v > (INT64_MAX >> shift) || v < (INT64_MIN >> shift))
        return INT_OVERFLOW;
    *out = v * ((int64_t)1 << shift);
    return INT_OK;
}

static varlog_err_t set_int(varlog_conf_t *conf, const conf_property_t *p, const char *value)
{
    char range[64];
    int64_t v = 0;
    bool bytes = strcmp(p->unit, "bytes") == 0;
    enum int_parse r =
        bytes ? parse_size(value, strlen(value), &v) : parse_int64(value, strlen(value), &v);
    if (r == INT_NOT_INT)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: \"%.*s%s\" is not an integer%s", p->name,
                           SHOWN(value, strlen(value)),
                           bytes ? " (a size may end in k, m or g: x1024)" : "");
    if (r == INT_OVERFLOW || v < p->min || v > p->max)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: %.*s%s is out of range %s", p->name,
                           SHOWN(value, strlen(value)),
                           conf_property_range(p, range, sizeof(range)));
    *(int64_t *)field_of(conf, p) = v;
    return VARLOG_OK;
}

static varlog_err_t set_bool(varlog_conf_t *conf, const conf_property_t *p, const char *value)
{
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(value, yes[i]) == 0 || strcasecmp(value, no[i]) == 0) {
            *(bool *)field_of(conf, p) = strcasecmp(value, yes[i]) == 0;
            return VARLOG_OK;
        }
    }
    return errtext_set(VARLOG_ERR_INVALID_ARG,
                       "%s: \"%.*s%s\" is not a boolean (true/false, 1/0, yes/no, on/off)", p->name,
                       SHOWN(value, strlen(value)));
}

/* Index of the symbol s[0, len) names, case-insensitively; -1 when none. */
static int find_symbol(const char *const *symbols, const char *s, size_t len)
{
    for (int i = 0; symbols[i]; i++) {
        if (strlen(symbols[i]) == len && strncasecmp(symbols[i], s, len) == 0)
            return i;
    }
    return -1;
}

static varlog_err_t set_enum(varlog_conf_t *conf, const conf_property_t *p, const char *value)
{
    char range[160];
    int idx = find_symbol(p->symbols, value, strlen(value));
    if (idx < 0)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: \"%.*s%s\" is not one of %s", p->name,
                           SHOWN(value, strlen(value)),
                           conf_property_range(p, range, sizeof(range)));
    memcpy(field_of(conf, p), &idx, sizeof(idx));
    return VARLOG_OK;
}

static varlog_err_t set_ctxs(varlog_conf_t *conf, const conf_property_t *p, const char *value)
{
    char range[160];
    unsigned bits = 0;
    if (!all_space(value)) {
        const char *s = value;
        for (;;) {
            const char *comma = strchr(s, ',');
            const char *elem = s;
            size_t len = comma ? (size_t)(comma - s) : strlen(s);
            trim(&elem, &len);
            if (len == 0)
                return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: \"%.*s%s\" has an empty element",
                                   p->name, SHOWN(value, strlen(value)));
            int idx = find_symbol(p->symbols, elem, len);
            if (idx >= 0)
                bits |= 1u << idx;
            else if (len == strlen(CONF_CTX_ALL_WORD) &&
                     strncasecmp(elem, CONF_CTX_ALL_WORD, len) == 0)
                bits |= VARLOG_LOG_CTX_ALL;
            else
                return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: \"%.*s%s\" is not one of %s",
                                   p->name, SHOWN(elem, len),
                                   conf_property_range(p, range, sizeof(range)));
            if (!comma)
                break;
            s = comma + 1;
        }
    }
    *(unsigned *)field_of(conf, p) = bits;
    return VARLOG_OK;
}

/* Checks one host:port element. The port is what follows the last ':'; a host that itself
 * holds a ':' (IPv6) must be in brackets, or "::1:80" would be ambiguous. */
static varlog_err_t check_address(const conf_property_t *p, const char *a, size_t len)
{
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++) {
        if (a[i] == ':')
            colon = a + i;
    }
    size_t host_len = colon ? (size_t)(colon - a) : 0;
    if (!colon || host_len == 0)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: \"%.*s%s\" is not host:port", p->name,
                           SHOWN(a, len));
    bool bracketed = a[0] == '[';
    if (bracketed != (a[host_len - 1] == ']') || (bracketed && host_len < 3))
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: \"%.*s%s\" has a malformed [host]", p->name,
                           SHOWN(a, len));
    for (size_t i = 0; i < host_len; i++) {
        bool bad = is_space(a[i]) || (!bracketed && a[i] == ':') ||
                   (i > 0 && i < host_len - 1 && (a[i] == '[' || a[i] == ']'));
        if (bad)
            return errtext_set(VARLOG_ERR_INVALID_ARG,
                               "%s: \"%.*s%s\" is not host:port (IPv6 hosts go in brackets)",
                               p->name, SHOWN(a, len));
    }
    const char *port = colon + 1;
    size_t port_len = len - host_len - 1;
    int64_t v = 0;
    enum int_parse r = parse_int64(port, port_len, &v);
    if (r == INT_NOT_INT)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "%s: \"%.*s%s\" has no decimal port", p->name,
                           SHOWN(a, len));
    if (r == INT_OVERFLOW || v < 1 || v > CONF_PORT_MAX)
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "%s: \"%.*s%s\" has port %.*s%s, out of range [1, %d]", p->name,
                           SHOWN(a, len), SHOWN(port, port_len), CONF_PORT_MAX);
    return VARLOG_OK;
}

/* Stores the list with the spaces around its elements removed, so the client splits it on
 * ',' alone. Blank means unset. */
static varlog_err_t set_addrs(varlog_conf_t *conf, const conf_property_t *p, const char *value)
{
    char *norm = NULL;
    if (!all_space(value)) {
        norm = malloc(strlen(value) + 1);
        if (!norm)
            return errtext_set(VARLOG_ERR_NOMEM, "%s: out of memory", p->name);
        size_t out = 0;
        const char *s = value;
        for (;;) {
            const char *comma = strchr(s, ',');
            const char *elem = s;
            size_t len = comma ? (size_t)(comma - s) : strlen(s);
            trim(&elem, &len);
            varlog_err_t err = len == 0 ? errtext_set(VARLOG_ERR_INVALID_ARG,
                                                      "%s: \"%.*s%s\" has an empty element",
                                                      p->name, SHOWN(value, strlen(value)))
                                        : check_address(p, elem, len);
            if (err != VARLOG_OK) {
                free(norm);
                return err;
            }
            if (out > 0)
                norm[out++] = ',';
            memcpy(norm + out, elem, len);
            out += len;
            if (!comma)
                break;
            s = comma + 1;
        }
        norm[out] = '\0';
    }
    char **field = field_of(conf, p);
    free(*field);
    *field = norm;
    return VARLOG_OK;
}

/* Parses value into p's field; on failure the field is untouched and the thread's error
 * text says why. */
static varlog_err_t set_value(varlog_conf_t *conf, const conf_property_t *p, const char *value)
{
    switch (p->type) {
    case CONF_TYPE_INT:
        return set_int(conf, p, value);
    case CONF_TYPE_BOOL:
        return set_bool(conf, p, value);
    case CONF_TYPE_ADDRS:
        return set_addrs(conf, p, value);
    case CONF_TYPE_ENUM:
        return set_enum(conf, p, value);
    case CONF_TYPE_CTXS:
        return set_ctxs(conf, p, value);
    }
    return errtext_set(VARLOG_ERR_INTERNAL, "%s: unknown property type", p->name);
}

/* ---- formatting -------------------------------------------------------------------------- */

/* snprintf-style: writes the canonical form of p's value into buf (size bytes, may be 0)
 * and returns its length without the NUL. */
static size_t format_value(const varlog_conf_t *conf, const conf_property_t *p, char *buf,
                           size_t size)
{
    const void *field = cfield_of(conf, p);
    const char *text = "";
    char ctxs[128];
    switch (p->type) {
    case CONF_TYPE_INT: {
        int n = snprintf(buf, size, "%" PRId64, *(const int64_t *)field);
        return n > 0 ? (size_t)n : 0;
    }
    case CONF_TYPE_BOOL:
        text = *(const bool *)field ? "true" : "false";
        break;
    case CONF_TYPE_ADDRS: {
        const char *const *addrs = field;
        text = *addrs ? *addrs : "";
        break;
    }
    case CONF_TYPE_ENUM: {
        int idx;
        memcpy(&idx, field, sizeof(idx));
        text = "?";
        for (int i = 0; p->symbols[i]; i++) {
            if (i == idx)
                text = p->symbols[i];
        }
        break;
    }
    case CONF_TYPE_CTXS: {
        unsigned bits = *(const unsigned *)field;
        size_t len = 0;
        ctxs[0] = '\0';
        if (bits == VARLOG_LOG_CTX_ALL) {
            snprintf(ctxs, sizeof(ctxs), CONF_CTX_ALL_WORD);
        } else {
            for (unsigned i = 0; p->symbols[i] && len < sizeof(ctxs); i++) {
                if (!(bits & (1u << i)))
                    continue;
                int n =
                    snprintf(ctxs + len, sizeof(ctxs) - len, "%s%s", len ? "," : "", p->symbols[i]);
                len += n > 0 ? (size_t)n : 0;
            }
        }
        text = ctxs;
        break;
    }
    }
    int n = snprintf(buf, size, "%s", text);
    return n > 0 ? (size_t)n : 0;
}

/* ---- public API -------------------------------------------------------------------------- */

void varlog_conf_destroy(varlog_conf_t *conf)
{
    if (!conf)
        return;
    free(conf->metadata_addresses);
    free(conf);
}

varlog_conf_t *varlog_conf_new(void)
{
    varlog_conf_t *conf = calloc(1, sizeof(*conf));
    if (!conf)
        return NULL;
    for (size_t i = 0; i < conf_property_count(); i++) {
        const conf_property_t *p = conf_property(i);
        if (set_value(conf, p, p->def) != VARLOG_OK) {
            varlog_conf_destroy(conf);
            return NULL;
        }
    }
    return conf;
}

varlog_conf_t *varlog_conf_dup(const varlog_conf_t *conf)
{
    if (!conf)
        return NULL;
    varlog_conf_t *copy = malloc(sizeof(*copy));
    if (!copy)
        return NULL;
    *copy = *conf;
    if (conf->metadata_addresses) {
        copy->metadata_addresses = strdup(conf->metadata_addresses);
        if (!copy->metadata_addresses) {
            free(copy);
            return NULL;
        }
    }
    return copy;
}

static varlog_err_t fail(varlog_err_t err, char *errstr, size_t errstr_size)
{
    errtext_copy(errstr, errstr_size);
    return err;
}

varlog_err_t varlog_conf_set(varlog_conf_t *conf, const char *name, const char *value, char *errstr,
                             size_t errstr_size)
{
    varlog_err_t err;
    if (!conf || !name || !value) {
        err = errtext_set(VARLOG_ERR_INVALID_ARG, "varlog_conf_set: %s is NULL",
                          !conf   ? "conf"
                          : !name ? "name"
                                  : "value");
        return fail(err, errstr, errstr_size);
    }
    const conf_property_t *p = conf_find_property(name);
    if (!p) {
        err = errtext_set(VARLOG_ERR_INVALID_ARG, "unknown property \"%.*s%s\"",
                          SHOWN(name, strlen(name)));
        return fail(err, errstr, errstr_size);
    }
    err = set_value(conf, p, value);
    if (err != VARLOG_OK)
        return fail(err, errstr, errstr_size);
    if (errstr && errstr_size > 0)
        errstr[0] = '\0';
    return VARLOG_OK;
}

varlog_err_t varlog_conf_get(const varlog_conf_t *conf, const char *name, char *buf, size_t *size)
{
    if (!conf || !name || !size)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "varlog_conf_get: %s is NULL",
                           !conf   ? "conf"
                           : !name ? "name"
                                   : "size");
    const conf_property_t *p = conf_find_property(name);
    if (!p)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "unknown property \"%.*s%s\"",
                           SHOWN(name, strlen(name)));
    size_t need = format_value(conf, p, NULL, 0) + 1;
    if (buf && *size >= need)
        format_value(conf, p, buf, *size);
    *size = need;
    return VARLOG_OK;
}

void varlog_conf_set_log_cb(varlog_conf_t *conf, varlog_log_cb *cb, void *opaque)
{
    if (!conf)
        return;
    conf->log_cb = cb;
    conf->log_opaque = opaque;
}

void varlog_conf_set_stats_cb(varlog_conf_t *conf, varlog_stats_cb *cb, void *opaque)
{
    if (!conf)
        return;
    conf->stats_cb = cb;
    conf->stats_opaque = opaque;
}

void varlog_conf_set_subscribe_observer(varlog_conf_t *conf, varlog_subscribe_observer_cb *cb,
                                        void *opaque)
{
    if (!conf)
        return;
    conf->subscribe_observer = cb;
    conf->subscribe_observer_opaque = opaque;
}

const char *varlog_conf_property_name(size_t i)
{
    const conf_property_t *p = conf_property(i);
    return p ? p->name : NULL;
}

/* ---- cross-property checks --------------------------------------------------------------- */

/* Pairs of integer properties where the first must not exceed the second. */
typedef struct conf_order_rule {
    const char *small, *large; /* property names */
    size_t small_off, large_off;
    const char *why; /* appended to the error text; "" when the names say it */
} conf_order_rule_t;

#define ORDER_RULE(a, fa, b, fb, why)                                                              \
    {                                                                                              \
        a, b, offsetof(struct varlog_conf, fa), offsetof(struct varlog_conf, fb), why              \
    }

static const conf_order_rule_t order_rules[] = {
    ORDER_RULE("append.retry.backoff.ms", append_retry_backoff_ms, "append.retry.backoff.max.ms",
               append_retry_backoff_max_ms, ""),
    ORDER_RULE("subscribe.retry.backoff.ms", subscribe_retry_backoff_ms,
               "subscribe.retry.backoff.max.ms", subscribe_retry_backoff_max_ms, ""),
    ORDER_RULE("lookup.batch.size", lookup_batch_size, "retry.workers", retry_workers,
               ": each waiting lookup holds a retry worker, so the batch could never fill"),
    ORDER_RULE("append.record.max.bytes", append_record_max_bytes, "append.batch.max.bytes",
               append_batch_max_bytes, ": such a record could never be appended"),
    ORDER_RULE("appender.batch.max.records", appender_batch_max_records, "append.batch.max.records",
               append_batch_max_records, ""),
    ORDER_RULE("appender.batch.max.bytes", appender_batch_max_bytes, "append.batch.max.bytes",
               append_batch_max_bytes, ""),
    ORDER_RULE("appender.batch.max.records", appender_batch_max_records,
               "appender.queue.max.records", appender_queue_max_records,
               ": a full batch could never be queued"),
    ORDER_RULE("appender.batch.max.bytes", appender_batch_max_bytes, "appender.queue.max.bytes",
               appender_queue_max_bytes, ": a full batch could never be queued"),
};

static int64_t conf_int(const varlog_conf_t *conf, size_t off)
{
    int64_t v;
    memcpy(&v, (const char *)conf + off, sizeof(v));
    return v;
}

varlog_err_t conf_validate(const varlog_conf_t *conf)
{
    if (!conf)
        return errtext_set(VARLOG_ERR_INVALID_ARG, "configuration is NULL");
    if (!conf->metadata_addresses || conf->metadata_addresses[0] == '\0')
        return errtext_set(VARLOG_ERR_INVALID_ARG,
                           "metadata.addresses is not set: the client needs the host:port "
                           "addresses of the metadata repository");
    for (size_t i = 0; i < sizeof(order_rules) / sizeof(order_rules[0]); i++) {
        const conf_order_rule_t *r = &order_rules[i];
        int64_t small = conf_int(conf, r->small_off), large = conf_int(conf, r->large_off);
        if (small > large)
            return errtext_set(VARLOG_ERR_INVALID_ARG,
                               "%s (%" PRId64 ") is greater than %s (%" PRId64 ")%s", r->small,
                               small, r->large, large, r->why);
    }
    return VARLOG_OK;
}
