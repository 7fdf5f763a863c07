/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the TOML parser: parse with the default limits and
 * with tight ones, then walk the tree and check what the API promises
 * (every key found again by lookup, strings NUL-terminated, positions set). */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "toml.h"

#define INPUT_MAX (64u * 1024u)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Recursion is bounded: the parser refuses trees deeper than max_depth. */
static void check_tree(const TomlValue *v, size_t depth) {
        if (depth > 128 || v->pos.line == 0 || v->pos.col == 0 || !toml_type_to_string(v->type))
                abort();

        switch (v->type) {
        case TOML_TABLE:
                for (size_t i = 0; i < v->table.n; i++) {
                        const TomlEntry *e = &v->table.entries[i];
                        if (e->key[e->key_len] != '\0' || e->key_pos.line == 0 || e->key_pos.col == 0)
                                abort();
                        if (toml_table_get_n(v, e->key, e->key_len) != e)
                                abort();
                        if (memchr(e->key, '\0', e->key_len) == NULL && toml_table_get(v, e->key) != e)
                                abort();
                        check_tree(e->value, depth + 1);
                }
                break;
        case TOML_ARRAY:
                for (size_t i = 0; i < v->array.n; i++)
                        check_tree(v->array.items[i], depth + 1);
                break;
        case TOML_STRING:
                if (v->str.s[v->str.len] != '\0')
                        abort();
                break;
        case TOML_DATETIME:
        case TOML_DATETIME_LOCAL:
        case TOML_DATE_LOCAL:
        case TOML_TIME_LOCAL:
                if (v->dt.nanosecond >= 1000000000u || v->dt.hour > 23 || v->dt.minute > 59 || v->dt.second > 60)
                        abort();
                break;
        case TOML_INTEGER:
        case TOML_FLOAT:
        case TOML_BOOL:
                break;
        case _TOML_TYPE_MAX:
        case _TOML_TYPE_INVALID:
                abort();
        }
}

static void parse_once(const uint8_t *data, size_t size, const TomlLimits *limits) {
        TomlValue *root = NULL;
        TomlError error;
        int r;

        memset(&error, 0xA5, sizeof(error)); /* catch messages left unterminated */
        r = toml_parse((const char *) data, size, limits, &root, &error);
        if (r < 0) {
                if (r != -EINVAL && r != -E2BIG && r != -ENOMEM)
                        abort();
                if (!memchr(error.message, '\0', sizeof(error.message)) || error.message[0] == '\0' ||
                    error.pos.line == 0 || error.pos.col == 0)
                        abort();
                return;
        }
        if (!root || root->type != TOML_TABLE)
                abort();
        check_tree(root, 0);
        toml_free(root);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > INPUT_MAX)
                return 0;

        parse_once(data, size, NULL);
        parse_once(data, size, &(const TomlLimits){ .max_depth = 3, .max_string = 8 });
        return 0;
}
