/* client streams: see rpc_client.h */
