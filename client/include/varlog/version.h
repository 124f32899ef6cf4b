#ifndef VARLOG_VERSION_H
#define VARLOG_VERSION_H

#include "varlog/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VARLOG_VERSION_MAJOR 0
#define VARLOG_VERSION_MINOR 1
#define VARLOG_VERSION_PATCH 0
/* One number for compile-time comparisons: 0xMMmmpp. */
#define VARLOG_VERSION_NUM                                                                         \
    ((VARLOG_VERSION_MAJOR << 16) | (VARLOG_VERSION_MINOR << 8) | VARLOG_VERSION_PATCH)

/* The library's version as VARLOG_VERSION_NUM, so a program can compare the library it runs
 * against with the headers it was built with. Any thread. */
VARLOG_API int varlog_version(void);

/* The library's version as "MAJOR.MINOR.PATCH"; a static string. Any thread. */
VARLOG_API const char *varlog_version_str(void);

#ifdef __cplusplus
}
#endif
#endif
