#ifndef VARLOG_BAD_INPUT_ADMIN_H
#define VARLOG_BAD_INPUT_ADMIN_H

/* What test_bad_input_admin.c and bad_input_server.c share: the state their rows run against
 * and the server's table. */
#include "bad_input.h"
#include "varlog/admin.h"
#include "varlog/server.h"

#define ADM(m) "/varlog.admpb.ClusterManager/" m
#define M_METADATA "/varlog.mrpb.MetadataRepositoryService/GetMetadata"
#define M_APPEND "/varlog.snpb.LogIO/Append"

struct bi_env {
    varlog_server_t *srv; /* topics 1 and 2, log streams 1, 2 and 3, 4 */
    varlog_admin_t *admin;
};

/* bad_input_server.c: the embedded server's rows. */
extern const bi_table_t bi_server_rows;

/* A row whose text is not checked: the server sets no last error. */
#define NOTEXT BI_NO_TEXT
#define NF VARLOG_ERR_RPC_NOT_FOUND

#endif
