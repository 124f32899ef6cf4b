int varlog_pool_placeholder(void); int varlog_pool_placeholder(void) { return 0; }
