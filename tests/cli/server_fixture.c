#include "server_fixture.h"

#include <stdlib.h>

int server_fixture_setup(void **state, int topics, int log_streams)
{
    server_fixture_t *f = calloc(1, sizeof *f);
    varlog_server_opts_t opts = {.topics = topics, .log_streams_per_topic = log_streams};
    if (!f || varlog_server_start(&opts, &f->srv) != VARLOG_OK) {
        free(f);
        return -1;
    }
    f->addr = varlog_server_address(f->srv);
    *state = f;
    return 0;
}

int server_fixture_teardown(void **state)
{
    server_fixture_t *f = *state;
    varlog_server_destroy(f->srv);
    free(f);
    return 0;
}
