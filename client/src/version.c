#include "varlog/version.h"

#define VARLOG_STR2(x) #x
#define VARLOG_STR(x) VARLOG_STR2(x)

int varlog_version(void)
{
    return VARLOG_VERSION_NUM;
}

const char *varlog_version_str(void)
{
    return VARLOG_STR(VARLOG_VERSION_MAJOR) "." VARLOG_STR(VARLOG_VERSION_MINOR) "." VARLOG_STR(
        VARLOG_VERSION_PATCH);
}
