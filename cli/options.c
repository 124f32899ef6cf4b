/* Long options matched whole: see options.h. */
#include "options.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static const char *refused;

/* The length of the name in "--name[=value]". */
static size_t name_length(const char *text)
{
    return strcspn(text + 2, "=");
}

int cli_option_is(const struct option *longopts, const char *text, int *index)
{
    if (text[0] != '-' || text[1] != '-' || text[2] == '\0')
        return 0;
    size_t len = name_length(text);
    for (int i = 0; longopts[i].name; i++) {
        if (strlen(longopts[i].name) == len && strncmp(longopts[i].name, text + 2, len) == 0) {
            if (index)
                *index = i;
            return 1;
        }
    }
    return 0;
}

int cli_getopt_long(int argc, char *const argv[], const char *optstring,
                    const struct option *longopts)
{
    refused = NULL;
    int index = -1;
    optarg = NULL;
    int c = getopt_long(argc, argv, optstring, longopts, &index);
    if (c == -1 || c == '?' || c == ':' || index < 0)
        return c;
    /* getopt_long has just stepped past the option, and past its value when that was the
     * next argument (optarg is then that argument itself, not a part of the option's text). */
    int at = optind - 1;
    if (optarg && at > 0 && optarg == argv[at])
        at--;
    const char *text = argv[at];
    size_t len = name_length(text);
    if (strlen(longopts[index].name) != len) {
        refused = text;
        optopt = 0;
        return '?';
    }
    return c;
}

const char *cli_getopt_refused(void)
{
    return refused;
}

const char *cli_option_hint(const struct option *longopts, const char *text, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (text[0] != '-' || text[1] != '-' || cap == 0)
        return buf;
    size_t len = name_length(text);
    int found = 0;
    size_t used = 0;
    for (int i = 0; longopts[i].name; i++) {
        if (len == 0 || strncmp(longopts[i].name, text + 2, len) != 0)
            continue;
        int n = snprintf(buf + used, cap - used, "%s--%s", found ? " or " : " (did you mean ",
                         longopts[i].name);
        if (n < 0 || (size_t)n >= cap - used) {
            buf[0] = '\0';
            return buf;
        }
        used += (size_t)n;
        found++;
    }
    if (found && used + 2 < cap)
        strcat(buf, "?)");
    else
        buf[0] = '\0';
    return buf;
}
