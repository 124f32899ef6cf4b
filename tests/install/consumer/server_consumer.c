/* Built against an installed libvarlog_server (find_package target libvarlog::varlog_server,
 * or pkg-config libvarlog_server): starts an embedded server on a free port and stops it. */
#include <stdio.h>

#include <varlog/server.h>
#include <varlog/varlog.h>

int main(void)
{
    varlog_server_opts_t opts = {.topics = 1, .log_streams_per_topic = 2};
    varlog_server_t *srv = NULL;
    varlog_err_t err = varlog_server_start(&opts, &srv);
    if (err != VARLOG_OK) {
        fprintf(stderr, "server_consumer: %s\n", varlog_err_str(err));
        return 1;
    }
    printf("embedded server at %s\n", varlog_server_address(srv));
    varlog_server_destroy(srv);
    return 0;
}
