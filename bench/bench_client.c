/* The client the network benchmarks open: see bench_client.h. */
#include "bench_client.h"

#include <stdio.h>

int bench_client_open(const char *address, const char *const *extra, varlog_client_t **out)
{
    varlog_conf_t *conf = varlog_conf_new();
    char err[512];
    if (!conf) {
        fprintf(stderr, "varlog_conf_new: out of memory\n");
        return -1;
    }
    const char *base[] = {"metadata.addresses",
                          address,
                          "metadata.refresh.interval.ms",
                          "0",
                          "log.level",
                          "err",
                          NULL};
    for (int pass = 0; pass < 2; pass++) {
        const char *const *kv = pass == 0 ? base : extra;
        for (size_t i = 0; kv && kv[i]; i += 2) {
            if (varlog_conf_set(conf, kv[i], kv[i + 1], err, sizeof(err)) != VARLOG_OK) {
                fprintf(stderr, "conf %s: %s\n", kv[i], err);
                varlog_conf_destroy(conf);
                return -1;
            }
        }
    }
    varlog_err_t rc = varlog_client_new(&conf, out, err, sizeof(err));
    if (rc != VARLOG_OK) {
        fprintf(stderr, "varlog_client_new: %s: %s\n", varlog_err_name(rc), err);
        varlog_conf_destroy(conf);
        return -1;
    }
    return 0;
}
