/* client transport: see rpc_client.h */
