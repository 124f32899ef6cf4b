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
    printf("libvarlog %s: %s\n", varlog_version_str(), varlog_err_str(VARLOG_ERR_RPC_UNAVAILABLE));
    return 0;
}
