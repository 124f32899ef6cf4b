/* varlog-cli's commands: one row each; `varlog-cli --help` lists them in this order. */
#include <string.h>

#include "cli.h"

/* The common options' long names; -X and -q are short options of main.c's own. */
const struct option cli_common_options[] = {
    {"mr", required_argument, NULL, CLI_OPT_MR},
    {"topics", required_argument, NULL, CLI_OPT_TOPICS},
    {"log-streams", required_argument, NULL, CLI_OPT_LOG_STREAMS},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

const cli_command_t cli_commands[] = {
    {"append", cmd_append, cli_append_options,
     "append records from stdin lines, or generated ones"},
    {"subscribe", cmd_subscribe, cli_subscribe_options,
     "read a topic in GLSN order (tails for ever by default)"},
    {"subscribe-to", cmd_subscribe_to, cli_subscribe_to_options,
     "read one log stream in LLSN order"},
    {"peek", cmd_peek, cli_peek_options, "first and last entries of log streams"},
    {"trim", cmd_trim, cli_trim_options, "delete a topic's entries up to a GLSN"},
    {"topics", cmd_topics, cli_topics_options, "topics and their log streams"},
    {"bench", cmd_bench, cli_bench_options,
     "append and/or subscribe benchmark with a latency summary"},
    {"demo", cmd_demo, cli_demo_options,
     "append records, read them back, check them and print throughput"},
};

const size_t cli_command_count = sizeof cli_commands / sizeof cli_commands[0];

const cli_command_t *cli_command_find(const char *name)
{
    for (size_t i = 0; i < cli_command_count; i++)
        if (strcmp(cli_commands[i].name, name) == 0)
            return &cli_commands[i];
    return NULL;
}
