/* SPDX-License-Identifier: MIT */
#pragma once

/* A TOML 1.0.0 parser. Debian ships no C TOML library, so this one is ours;
 * it is checked against the toml-test corpus (tests/toml-test-run.py) and
 * fuzzed (fuzz/fuzz-toml.c).
 *
 * The parser builds a tree of TomlValue nodes. Every node remembers where it
 * was written (1-based line and column, columns counted in Unicode code
 * points), and every key remembers its own position, so configuration errors
 * can point at FILE:LINE:COL. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

typedef enum TomlType {
        TOML_STRING,
        TOML_INTEGER,
        TOML_FLOAT,
        TOML_BOOL,
        TOML_DATETIME, /* offset date-time */
        TOML_DATETIME_LOCAL, /* local date-time */
        TOML_DATE_LOCAL,
        TOML_TIME_LOCAL,
        TOML_ARRAY,
        TOML_TABLE,
        _TOML_TYPE_MAX,
        _TOML_TYPE_INVALID = -EINVAL,
} TomlType;

typedef struct TomlPos {
        unsigned line; /* 1-based */
        unsigned col; /* 1-based, in code points */
} TomlPos;

typedef struct TomlDatetime {
        int year, month, day; /* valid for DATETIME, DATETIME_LOCAL, DATE_LOCAL */
        int hour, minute, second; /* valid for DATETIME, DATETIME_LOCAL, TIME_LOCAL */
        uint32_t nanosecond; /* fractional seconds, truncated to ns */
        int offset_minutes; /* DATETIME only; "Z" is 0 */
} TomlDatetime;

typedef struct TomlValue TomlValue;

typedef struct TomlEntry {
        char *key; /* NUL-terminated; a quoted key may also contain NUL via \u0000 (key_len is exact) */
        size_t key_len;
        TomlPos key_pos; /* where this key was first written */
        TomlValue *value;
} TomlEntry;

struct TomlValue {
        TomlType type;
        TomlPos pos; /* where the value starts; for tables: the '[' of the header that defined
                      * it (or first named it), the key that created it by a dotted key, the '{'
                      * of an inline table, 1:1 for the root */
        union {
                struct {
                        char *s; /* NUL-terminated; may also contain NUL (see len); CRLF in
                                  * multi-line strings is normalised to LF */
                        size_t len;
                } str;
                int64_t integer;
                double flt;
                bool boolean;
                TomlDatetime dt;
                struct {
                        TomlValue **items;
                        size_t n;
                } array;
                struct {
                        TomlEntry *entries; /* in document order */
                        size_t n;
                } table;
        };
};

/* Upper bound applied to TomlLimits.max_depth: arrays and inline tables are
 * parsed recursively, so a larger limit would only trade -E2BIG for a stack
 * overflow. */
#define TOML_DEPTH_HARD_MAX 1024u

typedef struct TomlLimits {
        size_t max_depth; /* nesting of arrays/inline tables/table paths (each key part,
                           * array and array-of-tables element is a level; the root is 0);
                           * 0 = default 128, at most TOML_DEPTH_HARD_MAX */
        size_t max_string; /* bytes in one string or key after unescaping; 0 = default 1 MiB */
} TomlLimits;

typedef struct TomlError {
        TomlPos pos;
        char message[256];
} TomlError;

/* Parse a whole document of len bytes (need not be NUL-terminated; must be
 * UTF-8). limits may be NULL for the defaults. On success returns 0 and
 * *ret_root is a TOML_TABLE the caller frees with toml_free(). On failure
 * returns -EINVAL (syntax or semantic error: *ret_error says where and why),
 * -E2BIG (a limit was exceeded, also described in *ret_error) or -ENOMEM.
 * ret_error may be NULL; *ret_root is not touched on failure. A byte order
 * mark at the start is skipped and takes no column. */
int toml_parse(const char *data, size_t len, const TomlLimits *limits, TomlValue **ret_root, TomlError *ret_error);

/* Free a tree returned by toml_parse() (only whole trees, not subtrees);
 * accepts NULL, returns NULL. Iterative, so any depth is fine. */
TomlValue *toml_free(TomlValue *v);
DEFINE_TRIVIAL_CLEANUP_FUNC(TomlValue *, toml_free)

/* Look up key in a table (NULL if absent or v is not a table). The entry
 * points into the tree and lives as long as it. */
const TomlEntry *toml_table_get(const TomlValue *table, const char *key);

/* The same for a key of key_len bytes, which may contain NUL. */
const TomlEntry *toml_table_get_n(const TomlValue *table, const char *key, size_t key_len);

/* Structural equality: same type and value; arrays element by element in
 * order; tables with the same keys (in any order) and equal values.
 * Positions do not count. Floats compare by value (a NaN equals no float).
 * Recursive: call only on trees the parser bounded in depth. */
bool toml_value_equal(const TomlValue *a, const TomlValue *b);

/* "string", "integer", ..., as used in error messages and by toml-test. */
const char *toml_type_to_string(TomlType t);

/* "a string", "an integer", "a boolean", ... for messages such as "key 'x'
 * is already defined as an integer". Never NULL. */
const char *toml_type_with_article(TomlType t);
