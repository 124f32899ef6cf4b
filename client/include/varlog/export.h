#ifndef VARLOG_EXPORT_H
#define VARLOG_EXPORT_H

/* Every public function carries VARLOG_API; everything else in the shared library is hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define VARLOG_API __attribute__((visibility("default")))
#else
#define VARLOG_API
#endif

#endif
