#include "cluster_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The character after `"key":` and blanks, for each occurrence in turn. */
static const char *next_value(const char *p, const char *key)
{
    char pat[128];
    snprintf(pat, sizeof(pat), "\"%s\"", key);
    while ((p = strstr(p, pat)) != NULL) {
        p += strlen(pat);
        while (*p == ' ')
            p++;
        if (*p != ':')
            continue;
        p++;
        while (*p == ' ')
            p++;
        return p;
    }
    return NULL;
}

size_t json_ints(const char *json, const char *key, long long *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = json; (p = next_value(p, key)) != NULL;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p)
            continue;
        if (n < cap)
            out[n] = v;
        n++;
        p = end;
    }
    return n;
}

size_t json_strs(const char *json, const char *key, char (*out)[128], size_t cap)
{
    size_t n = 0;
    for (const char *p = json; (p = next_value(p, key)) != NULL;) {
        if (*p != '"')
            continue;
        const char *end = strchr(p + 1, '"');
        if (end == NULL)
            break;
        if (n < cap)
            snprintf(out[n], sizeof(out[n]), "%.*s", (int)(end - p - 1), p + 1);
        n++;
        p = end + 1;
    }
    return n;
}

size_t json_bools(const char *json, const char *key, int *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = json; (p = next_value(p, key)) != NULL;) {
        int v;
        if (strncmp(p, "true", 4) == 0)
            v = 1;
        else if (strncmp(p, "false", 5) == 0)
            v = 0;
        else
            continue;
        if (n < cap)
            out[n] = v;
        n++;
    }
    return n;
}
