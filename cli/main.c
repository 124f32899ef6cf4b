/* varlog-cli: the common options, then one command (cli/cmd_<name>.c) by name; common
 * options may also follow the command. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [OPTIONS] COMMAND [ARGS]\n"
            "\n"
            "Options (before or after the command; written whole, never abbreviated):\n"
            "  --mr HOST:PORT[,HOST:PORT]  the cluster's metadata repository; without it an\n"
            "                              embedded server is started in-process\n"
            "  -X KEY=VALUE                set a client property (CONFIGURATION.md); repeatable\n"
            "  --topics T                  embedded server: topics 1..T (default 1); refused\n"
            "                              with --mr (a command's --topic picks a topic)\n"
            "  --log-streams N             embedded server: N log streams per topic (default 2);\n"
            "                              refused with --mr\n"
            "  -q, --quiet                 no notice about the embedded server\n"
            "  (the library's own log lines are off; -X log.level=info turns them on)\n"
            "  -h, --help                  this text\n"
            "\n"
            "Commands:\n",
            prog);
    for (size_t i = 0; i < cli_command_count; i++)
        fprintf(out, "  %-14s %s\n", cli_commands[i].name, cli_commands[i].summary);
    fprintf(out,
            "\n`%s COMMAND --help` describes a command's arguments.\n"
            "Exit status: 0 success, 1 failure (then stdout holds no result), 2 bad\n"
            "arguments, 130 interrupted (Ctrl-C cut a finite job short; stderr says so).\n"
            "A number's suffix k, m or g multiplies it by 1024 (each command's help says which\n"
            "numbers take one: '" CLI_SIZE_SUFFIXES "').\n",
            prog);
}

static int set_property(cli_ctx_t *ctx, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) {
        fprintf(stderr, "%s: -X wants KEY=VALUE, not '%s'\n", ctx->prog, kv);
        return CLI_EXIT_USAGE;
    }
    char key[128];
    size_t klen = (size_t)(eq - kv);
    if (klen >= sizeof key) {
        fprintf(stderr, "%s: -X: property name too long: '%s'\n", ctx->prog, kv);
        return CLI_EXIT_USAGE;
    }
    memcpy(key, kv, klen);
    key[klen] = '\0';
    char errstr[256];
    if (varlog_conf_set(ctx->conf, key, eq + 1, errstr, sizeof errstr) != VARLOG_OK) {
        fprintf(stderr, "%s: -X %s\n", ctx->prog, errstr);
        return CLI_EXIT_USAGE;
    }
    if (ctx->n_given_properties < CLI_GIVEN_PROPERTIES_MAX)
        ctx->given_properties[ctx->n_given_properties++] = kv;
    return CLI_EXIT_OK;
}

/* The common short options; -h is parse_common's own (after the command it is the command's). */
#define COMMON_SHORT "X:q"

/* The command named after argv[from], for saying where a misplaced option belongs. */
static const cli_command_t *command_after(int argc, char **argv, int from)
{
    for (int i = from; i < argc; i++) {
        const cli_command_t *cmd = cli_command_find(argv[i]);
        if (cmd)
            return cmd;
    }
    return NULL;
}

/* Refuses the option before the command that getopt did not take (argv[optind - 1]): when it
 * is a command's own option (whole, or a prefix of one), one line says so and where it goes,
 * so that `--topic 2 trim` is never taken for anything else. */
static int common_option_misplaced(cli_ctx_t *ctx, int argc, char **argv)
{
    const char *text = cli_getopt_refused();
    if (!text)
        text = optind > 0 ? argv[optind - 1] : "?";
    if (text[0] != '-' || text[1] != '-')
        return cli_bad_option(ctx, '?', argv);
    const cli_command_t *cmd = command_after(argc, argv, optind);
    char hint[256];
    if (cmd && cli_option_is(cmd->options, text, NULL))
        return cli_usage_error(ctx,
                               "'%s' is an option of the %s command: give it after the command "
                               "name (%s [--mr ADDR] %s %s ...)",
                               text, cmd->name, ctx->prog, cmd->name, text);
    if (cmd && cli_option_hint(cmd->options, text, hint, sizeof hint)[0])
        return cli_usage_error(ctx,
                               "unknown option '%s': options are written whole, and a %s option "
                               "goes after the command name%s",
                               text, cmd->name, hint);
    if (cli_option_hint(cli_common_options, text, hint, sizeof hint)[0])
        return cli_usage_error(ctx, "unknown option '%s': options are written whole%s", text, hint);
    return cli_usage_error(ctx, "unknown option '%s' (see %s --help)", text, ctx->prog);
}

static int parse_common(cli_ctx_t *ctx, int argc, char **argv)
{
    /* '+': stop at the command name, whose options are the command's own. */
    int c;
    int64_t n;
    while ((c = cli_getopt_long(argc, argv, "+:" COMMON_SHORT "h", cli_common_options)) != -1) {
        switch (c) {
        case CLI_OPT_MR:
            if (optarg[0] == '\0') {
                fprintf(stderr, "%s: --mr wants HOST:PORT[,HOST:PORT]\n", ctx->prog);
                return CLI_EXIT_USAGE;
            }
            ctx->mr = optarg;
            break;
        case CLI_OPT_TOPICS:
            if (!cli_parse_i64(ctx, "--topics", optarg, 0, 1000000, false, &n))
                return CLI_EXIT_USAGE;
            ctx->embedded_topics = (int32_t)n;
            ctx->embedded_shape_option = "--topics";
            break;
        case CLI_OPT_LOG_STREAMS:
            if (!cli_parse_i64(ctx, "--log-streams", optarg, 0, 1000000, false, &n))
                return CLI_EXIT_USAGE;
            ctx->embedded_log_streams = (int32_t)n;
            ctx->embedded_shape_option = "--log-streams";
            break;
        case 'X': {
            int rc = set_property(ctx, optarg);
            if (rc != CLI_EXIT_OK)
                return rc;
            break;
        }
        case 'q':
            ctx->quiet = true;
            break;
        case 'h':
            usage(stdout, ctx->prog);
            return -1;
        default:
            if (c == '?' && !ctx->cmd)
                return common_option_misplaced(ctx, argc, argv);
            return cli_bad_option(ctx, c, argv);
        }
    }
    return CLI_EXIT_OK;
}

/* Whether arg is a common option, and whether its value is the next argument. Only whole
 * names count: an abbreviation after the command is the command's own (--topic is not
 * --topics). */
static bool is_common_option(const char *arg, bool *value_follows)
{
    *value_follows = false;
    if (arg[0] != '-' || arg[1] == '\0')
        return false;
    if (arg[1] != '-') { /* -q, -X VALUE, -XVALUE */
        const char *o = strchr(COMMON_SHORT, arg[1]);
        if (!o || *o == ':')
            return false;
        bool takes_value = o[1] == ':';
        if (!takes_value)
            return arg[2] == '\0';
        *value_follows = arg[2] == '\0';
        return true;
    }
    for (const struct option *o = cli_common_options; o->name; o++) {
        size_t n = strlen(o->name);
        if (o->val == 'h' || strncmp(arg + 2, o->name, n) != 0)
            continue;
        char end = arg[2 + n];
        if (end == '\0') {
            *value_follows = o->has_arg == required_argument;
            return true;
        }
        if (end == '=' && o->has_arg == required_argument)
            return true; /* --mr=ADDR */
    }
    return false;
}

/* Takes the common options that follow the command name out of the command's arguments and
 * applies them, so that `varlog-cli append --mr ADDR` means `varlog-cli --mr ADDR append`.
 * Stops at "--". Returns *argc_inout shortened, or a usage error as parse_common does. */
static int parse_common_after_command(cli_ctx_t *ctx, int *argc_inout, char **argv)
{
    int argc = *argc_inout;
    char **common = calloc((size_t)argc + 1, sizeof *common);
    if (!common) {
        fprintf(stderr, "%s: out of memory\n", ctx->prog);
        return CLI_EXIT_FAIL;
    }
    int n_common = 0, kept = 1;
    common[n_common++] = argv[0];
    for (int i = 1; i < argc; i++) {
        bool value_follows;
        if (strcmp(argv[i], "--") == 0) {
            while (i < argc)
                argv[kept++] = argv[i++];
            break;
        }
        if (!is_common_option(argv[i], &value_follows)) {
            argv[kept++] = argv[i];
            continue;
        }
        common[n_common++] = argv[i];
        if (value_follows && i + 1 < argc)
            common[n_common++] = argv[++i];
    }
    argv[kept] = NULL;
    *argc_inout = kept;
    int rc = CLI_EXIT_OK;
    if (n_common > 1) {
        cli_getopt_reset();
        rc = parse_common(ctx, n_common, common);
    }
    free(common);
    return rc;
}

int main(int argc, char **argv)
{
    cli_ctx_t ctx = {.prog = "varlog-cli", .embedded_topics = 1, .embedded_log_streams = 2};
    ctx.conf = varlog_conf_new();
    if (!ctx.conf) {
        fprintf(stderr, "%s: out of memory\n", ctx.prog);
        return CLI_EXIT_FAIL;
    }
    /* A tool's stderr carries its own one-line errors, which already hold the library's
     * text (varlog_last_error); its log lines (client open, reconnects, the same failure
     * again) would double or bury them. -X log.level=info brings them back. */
    varlog_conf_set(ctx.conf, "log.level", "crit", NULL, 0);
    int rc = parse_common(&ctx, argc, argv);
    if (rc != CLI_EXIT_OK) {
        varlog_conf_destroy(ctx.conf);
        return rc < 0 ? CLI_EXIT_OK : rc;
    }
    if (optind >= argc) {
        fprintf(stderr, "%s: no command given (see %s --help)\n", ctx.prog, ctx.prog);
        varlog_conf_destroy(ctx.conf);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[optind];
    const cli_command_t *cmd = cli_command_find(name);
    if (!cmd) {
        fprintf(stderr, "%s: unknown command '%s' (see %s --help)\n", ctx.prog, name, ctx.prog);
        varlog_conf_destroy(ctx.conf);
        return CLI_EXIT_USAGE;
    }
    ctx.cmd = cmd->name;
    int first = optind; /* cli_getopt_reset zeroes optind */
    int cmd_argc = argc - first;
    rc = parse_common_after_command(&ctx, &cmd_argc, argv + first);
    if (rc == CLI_EXIT_OK && ctx.mr && ctx.embedded_shape_option)
        rc = cli_usage_error(&ctx,
                             "%s shapes the embedded server and has no effect with --mr (the "
                             "cluster has its own topics; a command's --topic picks one)",
                             ctx.embedded_shape_option);
    if (rc != CLI_EXIT_OK) {
        varlog_conf_destroy(ctx.conf);
        return rc;
    }
    cli_getopt_reset();
    rc = cmd->run(&ctx, cmd_argc, argv + first);
    varlog_conf_destroy(ctx.conf);
    return rc;
}
