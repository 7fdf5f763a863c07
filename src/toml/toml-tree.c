/* SPDX-License-Identifier: MIT */
/* TOML's value tree (toml.h, toml-internal.h): nodes, tables (with a hash
 * index from TABLE_INDEX_MIN keys on) and arrays as the parser builds them,
 * and what callers do with the result: free it (iteratively), compare
 * values, name their types, look keys up. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "toml-internal.h"

TomlNode *node_of(const TomlValue *v) {
        return (TomlNode *) v;
}

TomlNode *node_new(TomlType type, TomlPos pos) {
        TomlNode *n = calloc(1, sizeof(TomlNode));
        if (!n)
                return NULL;
        n->v.type = type;
        n->v.pos = pos;
        return n;
}

TomlValue *toml_free(TomlValue *v) {
        TomlNode *todo;

        if (!v)
                return NULL;

        /* A work list threaded through the nodes themselves: no recursion and
         * no allocation, whatever the shape of the tree. */
        todo = node_of(v);
        todo->free_next = NULL;
        while (todo) {
                TomlNode *n = todo;
                todo = n->free_next;

                switch (n->v.type) {
                case TOML_STRING:
                        free(n->v.str.s);
                        break;
                case TOML_ARRAY:
                        for (size_t i = 0; i < n->v.array.n; i++) {
                                TomlNode *c = node_of(n->v.array.items[i]);
                                c->free_next = todo;
                                todo = c;
                        }
                        free(n->v.array.items);
                        break;
                case TOML_TABLE:
                        for (size_t i = 0; i < n->v.table.n; i++) {
                                TomlNode *c = node_of(n->v.table.entries[i].value);
                                free(n->v.table.entries[i].key);
                                c->free_next = todo;
                                todo = c;
                        }
                        free(n->v.table.entries);
                        free(n->slots);
                        break;
                case TOML_INTEGER:
                case TOML_FLOAT:
                case TOML_BOOL:
                case TOML_DATETIME:
                case TOML_DATETIME_LOCAL:
                case TOML_DATE_LOCAL:
                case TOML_TIME_LOCAL:
                case _TOML_TYPE_MAX:
                case _TOML_TYPE_INVALID:
                        break;
                }
                free(n);
        }
        return NULL;
}

void node_freep(TomlNode **n) {
        if (*n)
                toml_free(&(*n)->v);
}

const char *toml_type_to_string(TomlType t) {
        static const char *const names[_TOML_TYPE_MAX] = {
                [TOML_STRING] = "string",         [TOML_INTEGER] = "integer",
                [TOML_FLOAT] = "float",           [TOML_BOOL] = "bool",
                [TOML_DATETIME] = "datetime",     [TOML_DATETIME_LOCAL] = "datetime-local",
                [TOML_DATE_LOCAL] = "date-local", [TOML_TIME_LOCAL] = "time-local",
                [TOML_ARRAY] = "array",           [TOML_TABLE] = "table",
        };

        if (t < 0 || t >= _TOML_TYPE_MAX)
                return NULL;
        return names[t];
}

bool toml_value_equal(const TomlValue *a, const TomlValue *b) {
        if (!a || !b || a->type != b->type)
                return false;
        switch (a->type) {
        case TOML_STRING:
                return a->str.len == b->str.len && memcmp(a->str.s, b->str.s, a->str.len) == 0;
        case TOML_INTEGER:
                return a->integer == b->integer;
        case TOML_FLOAT:
                return a->flt == b->flt;
        case TOML_BOOL:
                return a->boolean == b->boolean;
        case TOML_DATETIME:
        case TOML_DATETIME_LOCAL:
        case TOML_DATE_LOCAL:
        case TOML_TIME_LOCAL:
                return a->dt.year == b->dt.year && a->dt.month == b->dt.month && a->dt.day == b->dt.day &&
                       a->dt.hour == b->dt.hour && a->dt.minute == b->dt.minute && a->dt.second == b->dt.second &&
                       a->dt.nanosecond == b->dt.nanosecond && a->dt.offset_minutes == b->dt.offset_minutes;
        case TOML_ARRAY:
                if (a->array.n != b->array.n)
                        return false;
                for (size_t i = 0; i < a->array.n; i++)
                        if (!toml_value_equal(a->array.items[i], b->array.items[i]))
                                return false;
                return true;
        case TOML_TABLE:
                if (a->table.n != b->table.n)
                        return false;
                for (size_t i = 0; i < a->table.n; i++) {
                        const TomlEntry *e = &a->table.entries[i];
                        const TomlEntry *f = toml_table_get_n(b, e->key, e->key_len);
                        if (!f || !toml_value_equal(e->value, f->value))
                                return false;
                }
                return true;
        case _TOML_TYPE_MAX:
        case _TOML_TYPE_INVALID:
                break;
        }
        return false;
}

const char *toml_type_with_article(TomlType t) {
        switch (t) {
        case TOML_STRING:
                return "a string";
        case TOML_INTEGER:
                return "an integer";
        case TOML_FLOAT:
                return "a float";
        case TOML_BOOL:
                return "a boolean";
        case TOML_DATETIME:
                return "a date-time";
        case TOML_DATETIME_LOCAL:
                return "a local date-time";
        case TOML_DATE_LOCAL:
                return "a local date";
        case TOML_TIME_LOCAL:
                return "a local time";
        case TOML_ARRAY:
                return "an array";
        case TOML_TABLE:
                return "a table";
        case _TOML_TYPE_MAX:
        case _TOML_TYPE_INVALID:
                break;
        }
        return "an invalid value";
}

/* Grow an array to hold at least need elements. Returns the (possibly moved)
 * array, or NULL on overflow or allocation failure with p left untouched. */
void *grow_array(void *p, size_t *cap, size_t need, size_t size) {
        size_t c;
        void *q;

        if (need <= *cap && p)
                return p;
        c = *cap < 8 ? 8 : *cap;
        while (c < need) {
                if (c > SIZE_MAX / 2)
                        return NULL;
                c *= 2;
        }
        if (c > SIZE_MAX / size)
                return NULL;
        q = realloc(p, c * size);
        if (!q)
                return NULL;
        *cap = c;
        return q;
}

char *memdup_nul(const char *s, size_t len) {
        char *d = malloc(len + 1);
        if (!d)
                return NULL;
        if (len > 0)
                memcpy(d, s, len);
        d[len] = '\0';
        return d;
}

/* ---- tables and arrays ---------------------------------------------------- */

static uint64_t key_hash(const char *s, size_t len) {
        uint64_t h = UINT64_C(14695981039346656037);
        for (size_t i = 0; i < len; i++) {
                h ^= (unsigned char) s[i];
                h *= UINT64_C(1099511628211);
        }
        return h;
}

static bool entry_is(const TomlEntry *e, const char *key, size_t len) {
        return e->key_len == len && (len == 0 || memcmp(e->key, key, len) == 0);
}

TomlEntry *table_find(const TomlNode *t, const char *key, size_t len) {
        if (t->slots) {
                size_t mask = t->n_slots - 1;
                for (size_t i = (size_t) key_hash(key, len) & mask;; i = (i + 1) & mask) {
                        size_t s = t->slots[i];
                        if (s == 0)
                                return NULL;
                        if (entry_is(&t->v.table.entries[s - 1], key, len))
                                return &t->v.table.entries[s - 1];
                }
        }
        for (size_t i = 0; i < t->v.table.n; i++)
                if (entry_is(&t->v.table.entries[i], key, len))
                        return &t->v.table.entries[i];
        return NULL;
}

static void table_slot_insert(TomlNode *t, size_t idx) {
        const TomlEntry *e = &t->v.table.entries[idx];
        size_t mask = t->n_slots - 1, i = (size_t) key_hash(e->key, e->key_len) & mask;

        while (t->slots[i] != 0)
                i = (i + 1) & mask;
        t->slots[i] = idx + 1;
}

/* Add an entry. On success the table owns key and value; on failure
 * (-ENOMEM) the caller still does. */
int table_add(TomlNode *t, char *key, size_t len, TomlPos key_pos, TomlNode *value) {
        size_t n = t->v.table.n;
        TomlEntry *entries;

        entries = grow_array(t->v.table.entries, &t->cap, n + 1, sizeof(TomlEntry));
        if (!entries)
                return -ENOMEM;
        t->v.table.entries = entries;

        if (n + 1 >= TABLE_INDEX_MIN && (n + 1) * 2 > t->n_slots) {
                size_t ns = t->n_slots ? t->n_slots : 16;
                size_t *slots;

                while (ns < (n + 1) * 2) {
                        if (ns > SIZE_MAX / 2 / sizeof(size_t))
                                return -ENOMEM;
                        ns *= 2;
                }
                slots = calloc(ns, sizeof(size_t));
                if (!slots)
                        return -ENOMEM;
                free(t->slots);
                t->slots = slots;
                t->n_slots = ns;
                for (size_t i = 0; i < n; i++)
                        table_slot_insert(t, i);
        }

        entries[n] = (TomlEntry){
                .key = key,
                .key_len = len,
                .key_pos = key_pos,
                .value = &value->v,
        };
        t->v.table.n = n + 1;
        if (t->slots)
                table_slot_insert(t, n);
        return 0;
}

/* On success the array owns item. */
int array_push(TomlNode *a, TomlNode *item) {
        TomlValue **items;

        items = grow_array(a->v.array.items, &a->cap, a->v.array.n + 1, sizeof(TomlValue *));
        if (!items)
                return -ENOMEM;
        a->v.array.items = items;
        items[a->v.array.n++] = &item->v;
        return 0;
}

const TomlEntry *toml_table_get_n(const TomlValue *table, const char *key, size_t key_len) {
        if (!table || table->type != TOML_TABLE || (!key && key_len > 0))
                return NULL;
        return table_find(node_of(table), key ? key : "", key_len);
}

const TomlEntry *toml_table_get(const TomlValue *table, const char *key) {
        if (!key)
                return NULL;
        return toml_table_get_n(table, key, strlen(key));
}
