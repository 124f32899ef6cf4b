/* Built against an installed libvarlog: checks the headers and the library agree. */
#include <stdio.h>
#include <string.h>

#include <varlog/varlog.h>

int main(void)
{
    if (varlog_version() != VARLOG_VERSION_NUM) {
        fprintf(stderr, "header version %x, library version %x\n", VARLOG_VERSION_NUM,
                varlog_version());
        return 1;
    }
    if (strcmp(varlog_err_name(VARLOG_ERR_TIMED_OUT), "ERR_TIMED_OUT") != 0)
        return 1;
    /* The client API links and reports bad input as documented, without a cluster. */
    varlog_conf_t *conf = varlog_conf_new();
    char err[128];
    if (!conf || varlog_conf_set(conf, "append.retries", "1000", err, sizeof(err)) !=
                     VARLOG_ERR_INVALID_ARG) {
        varlog_conf_destroy(conf);
        return 1;
    }
    varlog_client_t *client = NULL;
    if (varlog_client_new(&conf, &client, err, sizeof(err)) != VARLOG_ERR_INVALID_ARG || !conf) {
        varlog_conf_destroy(conf);
        return 1;
    }
    varlog_conf_destroy(conf);
    printf("libvarlog %s: %s\n", varlog_version_str(), varlog_err_str(VARLOG_ERR_RPC_UNAVAILABLE));
    return 0;
}
