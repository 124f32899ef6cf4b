/* varlog-cli bench: not written yet (issue 13). */
#include "cli.h"

int cmd_bench(cli_ctx_t *ctx, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "%s %s: not yet\n", ctx->prog, ctx->cmd);
    return CLI_EXIT_FAIL;
}
