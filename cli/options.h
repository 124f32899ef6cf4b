#ifndef VARLOG_CLI_OPTIONS_H
#define VARLOG_CLI_OPTIONS_H

/*
 * Long options matched whole, for varlog-cli and varlog-server.
 *
 * getopt_long takes any unambiguous prefix of a long option's name, so `--topic 2` before a
 * command was read as `--topics 2` and the command acted on topic 1. With these tools a
 * command can delete data: an option is taken only as written in full (`--topic`,
 * `--topic=2`); anything else is refused as unknown.
 */
#include <getopt.h>
#include <stddef.h>

/*
 * getopt_long, but a long option written as a prefix of its name is refused: returns '?'
 * (with optind past the option and any value it took) and cli_getopt_refused() returns the
 * option's text until the next call. Use an optstring starting with ':' (or "+:"), as
 * getopt's own messages are off (opterr = 0).
 */
int cli_getopt_long(int argc, char *const argv[], const char *optstring,
                    const struct option *longopts);

/* The text of the last option cli_getopt_long refused as an abbreviation ("--top"), or
 * NULL when the last call refused none. */
const char *cli_getopt_refused(void);

/* Whether text ("--name" or "--name=value") names one of longopts exactly; *index receives
 * its row when it does (index may be NULL). */
int cli_option_is(const struct option *longopts, const char *text, int *index);

/*
 * Writes " (did you mean --a or --b?)" into buf for the options of longopts whose name
 * starts with text's name, or "" when none does. Returns buf.
 */
const char *cli_option_hint(const struct option *longopts, const char *text, char *buf, size_t cap);

#endif
