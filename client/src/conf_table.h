#ifndef VARLOG_CONF_TABLE_H
#define VARLOG_CONF_TABLE_H

/*
 * Read access to the property table (conf_table.c), for the parser (conf.c), the
 * CONFIGURATION.md generator and tests. The table is the only place a property is described,
 * so the document, the parser and the range checks cannot drift apart; this header exposes
 * the rows rather than a second description of them.
 */
#include <stddef.h>
#include <stdint.h>

typedef enum conf_type {
    CONF_TYPE_INT,   /* int64_t field, strict decimal, checked against [min, max] */
    CONF_TYPE_BOOL,  /* bool field */
    CONF_TYPE_ADDRS, /* char * field: comma-separated host:port list, NULL when empty */
    CONF_TYPE_ENUM,  /* int-sized enum field holding the index of a symbol */
    CONF_TYPE_CTXS,  /* unsigned field: set of bits, bit i named by symbol i */
} conf_type_t;

typedef struct conf_property {
    const char *name;
    conf_type_t type;
    const char *def;  /* the default in the form varlog_conf_get returns; "" = unset/none */
    int64_t min, max; /* CONF_TYPE_INT only */
    const char *unit; /* "" when the value has no unit */
    const char *desc; /* one paragraph of plain text, no newlines */
    size_t offset;    /* of the field in struct varlog_conf */
    const char *const *symbols; /* ENUM and CTXS: NULL-terminated names, lower case */
} conf_property_t;

/* The "all" keyword of a context list: not a symbol, it names no bit of its own. */
#define CONF_CTX_ALL_WORD "all"
/* The largest port an address list accepts. */
#define CONF_PORT_MAX 65535

/* Number of rows; conf_property(i) is row i (NULL past the end). Same order as
 * varlog_conf_property_name. */
size_t conf_property_count(void);
const conf_property_t *conf_property(size_t i);

/* The row named name, NULL when there is none. */
const conf_property_t *conf_find_property(const char *name);

/* "int", "bool", "address list", "enum", "context list". */
const char *conf_type_name(conf_type_t type);

/* The values p accepts, as shown in error texts and the document: "[0, 100]" for integers,
 * "true, false" for booleans, the symbols for enums and context lists, the address form
 * for address lists. Writes at most size bytes (NUL-terminated) into buf and returns buf. */
const char *conf_property_range(const conf_property_t *p, char *buf, size_t size);

#endif
