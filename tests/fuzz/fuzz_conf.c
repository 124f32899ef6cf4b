/* The configuration parser (client/src/conf.c, one table of properties): lines of
 * name=value set one after another on one configuration, as a program passing through a
 * user's config file would. Each set either fails leaving the property as it was (with a
 * reason), or succeeds and the canonical form varlog_conf_get gives back sets the same
 * value again. A line "@<byte>=value" names property <byte> of the table, so that the
 * fuzzer reaches every property without guessing its name. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conf_internal.h"
#include "fuzz_util.h"
#include "varlog/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t n_properties(void)
{
    size_t n = 0;
    while (varlog_conf_property_name(n))
        n++;
    return n;
}

/* name's value, malloc'd; NULL for an unknown name. */
static char *get(const varlog_conf_t *conf, const char *name)
{
    size_t size = 0;
    if (varlog_conf_get(conf, name, NULL, &size) != VARLOG_OK)
        return NULL;
    FUZZ_CHECK(size >= 1);
    char *buf = malloc(size);
    FUZZ_CHECK(buf);
    size_t got = size;
    FUZZ_CHECK(varlog_conf_get(conf, name, buf, &got) == VARLOG_OK && got == size);
    FUZZ_CHECK(strlen(buf) + 1 == size);
    /* One byte short: nothing written, the same size asked for. */
    size_t shorter = size - 1;
    if (shorter > 0) {
        char *small = malloc(shorter);
        FUZZ_CHECK(small);
        memset(small, 'x', shorter);
        FUZZ_CHECK(varlog_conf_get(conf, name, small, &shorter) == VARLOG_OK && shorter == size);
        free(small);
    }
    return buf;
}

static void set_line(varlog_conf_t *conf, char *line, size_t errstr_size)
{
    char *eq = strchr(line, '=');
    const char *value = eq ? eq + 1 : "";
    if (eq)
        *eq = '\0';
    const char *name = line;
    size_t n = n_properties();
    if (line[0] == '@' && n > 0)
        name = varlog_conf_property_name((unsigned char)line[1] % n);

    char *before = get(conf, name);
    /* An exact-size error buffer: a write past errstr_size is an ASan report. */
    char *errstr = malloc(errstr_size ? errstr_size : 1);
    FUZZ_CHECK(errstr);
    varlog_err_t err = varlog_conf_set(conf, name, value, errstr_size ? errstr : NULL, errstr_size);
    if (errstr_size)
        FUZZ_CHECK(memchr(errstr, '\0', errstr_size));
    char *after = get(conf, name);
    FUZZ_CHECK((before == NULL) == (after == NULL));
    if (err != VARLOG_OK) {
        FUZZ_CHECK(err == VARLOG_ERR_INVALID_ARG || err == VARLOG_ERR_NOMEM);
        FUZZ_CHECK(!before || strcmp(before, after) == 0);
    } else {
        FUZZ_CHECK(after);
        /* The canonical form is a value of its own: set again, it reads back the same. */
        FUZZ_CHECK(varlog_conf_set(conf, name, after, NULL, 0) == VARLOG_OK);
        char *again = get(conf, name);
        FUZZ_CHECK(again && strcmp(again, after) == 0);
        free(again);
    }
    free(after);
    free(before);
    free(errstr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t errstr_size = data[0] % 80;
    char *text = malloc(size);
    FUZZ_CHECK(text);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    varlog_conf_t *conf = varlog_conf_new();
    FUZZ_CHECK(conf);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        set_line(conf, line, errstr_size);
    /* What varlog_client_new checks next; a copy reads the same everywhere. */
    (void)conf_validate(conf);
    varlog_conf_t *dup = varlog_conf_dup(conf);
    FUZZ_CHECK(dup);
    for (size_t i = 0; varlog_conf_property_name(i); i++) {
        char *a = get(conf, varlog_conf_property_name(i));
        char *b = get(dup, varlog_conf_property_name(i));
        FUZZ_CHECK(a && b && strcmp(a, b) == 0);
        free(a);
        free(b);
    }
    varlog_conf_destroy(dup);
    varlog_conf_destroy(conf);
    free(text);
    return 0;
}
