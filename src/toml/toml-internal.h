/* SPDX-License-Identifier: MIT */
#pragma once

/* The TOML parser's insides (toml.h is what its callers see): the node
 * every TomlValue is the first member of, and the value tree's operations
 * the parser builds it with. toml-tree.c holds the tree (nodes, tables with
 * their hash index, arrays, freeing, comparing, lookup); toml.c the parser. */

#include <stdbool.h>
#include <stddef.h>

#include "toml.h"

/* Tables with at least this many keys get a hash index, so documents with
 * thousands of keys in one table stay linear. */
#define TABLE_INDEX_MIN 8u

/* What a node was created by: the redefinition rules of TOML 1.0.0 depend on
 * it, and the public TomlValue has no room for it. */
enum {
        NODE_IMPLICIT = 1u << 0, /* table: intermediate of a [header] path, may still be defined once */
        NODE_DEFINED = 1u << 1, /* table: defined by a [header] or [[header]] */
        NODE_DOTTED = 1u << 2, /* table: created by a dotted key */
        NODE_INLINE = 1u << 3, /* table: inline table, closed to any addition */
        NODE_AOT = 1u << 4, /* array: created by [[header]], may be appended to */
};

/* Every TomlValue handed out is the first member of one of these. */
typedef struct TomlNode TomlNode;
struct TomlNode {
        TomlValue v;
        unsigned flags;
        size_t cap; /* allocated array items or table entries */
        size_t *slots; /* table index: entry number + 1, 0 = free; NULL for small tables */
        size_t n_slots; /* power of two */
        TomlNode *free_next;
};

/* toml-tree.c */
int array_push(TomlNode *a, TomlNode *item);
void *grow_array(void *p, size_t *cap, size_t need, size_t size);
char *memdup_nul(const char *s, size_t len);
void node_freep(TomlNode **n);
TomlNode *node_new(TomlType type, TomlPos pos);
TomlNode *node_of(const TomlValue *v);
int table_add(TomlNode *t, char *key, size_t len, TomlPos key_pos, TomlNode *value);
TomlEntry *table_find(const TomlNode *t, const char *key, size_t len);
