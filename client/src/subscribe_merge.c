/* The merge of a subscription. (Stub until implemented.) */
typedef int subscribe_merge_placeholder_t;
