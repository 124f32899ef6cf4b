/* server transport: see rpc_server.h */
