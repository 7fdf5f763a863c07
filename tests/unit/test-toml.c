/* SPDX-License-Identifier: MIT */
/* Unit tests of src/toml/toml.c: what toml-test cannot see (positions,
 * messages, document order, limits, lookups, NUL in strings). The corpus
 * run (tests/toml-test-run.py) covers conformance. */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fd-util.h"
#include "strbuf.h"
#include "toml-write.h"
#include "toml.h"

static TomlValue *parse_ok_n(const char *s, size_t len, const TomlLimits *limits) {
        TomlValue *root = NULL;
        TomlError e = {};
        int r = toml_parse(s, len, limits, &root, &e);
        if (r < 0)
                print_error("unexpected error %d at %u:%u: %s\n", r, e.pos.line, e.pos.col, e.message);
        assert_int_equal(r, 0);
        assert_non_null(root);
        assert_int_equal(root->type, TOML_TABLE);
        return root;
}

static TomlValue *parse_ok(const char *s) {
        return parse_ok_n(s, strlen(s), NULL);
}

/* Parse s expecting failure r at line:col with exactly message msg (NULL:
 * any message). Also checks that *ret_root is left alone. */
static void expect_error_n(const char *s, size_t len, const TomlLimits *limits, int r, unsigned line, unsigned col,
                           const char *msg) {
        TomlValue *sentinel = (TomlValue *) &sentinel, *root = sentinel;
        TomlError e = {};
        int q = toml_parse(s, len, limits, &root, &e);
        if (q != r || e.pos.line != line || e.pos.col != col || (msg && strcmp(e.message, msg) != 0))
                print_error("input %.60s: got %d at %u:%u: '%s'\n", s, q, e.pos.line, e.pos.col, e.message);
        assert_int_equal(q, r);
        assert_ptr_equal(root, sentinel);
        assert_int_equal(e.pos.line, line);
        assert_int_equal(e.pos.col, col);
        assert_true(e.message[0] != '\0');
        if (msg)
                assert_string_equal(e.message, msg);
}

static void expect_error_lim(const char *s, const TomlLimits *limits, int r, unsigned line, unsigned col,
                             const char *msg) {
        expect_error_n(s, strlen(s), limits, r, line, col, msg);
}

static TomlValue *parse_ok_lim(const char *s, const TomlLimits *limits) {
        return parse_ok_n(s, strlen(s), limits);
}

static void expect_error(const char *s, unsigned line, unsigned col, const char *msg) {
        expect_error_n(s, strlen(s), NULL, -EINVAL, line, col, msg);
}

/* Follow a dotted path of bare keys, requiring every step to exist. */
static const TomlEntry *get(const TomlValue *t, const char *path) {
        char buf[256];
        const TomlEntry *e = NULL;

        assert_true(strlen(path) < sizeof(buf));
        strcpy(buf, path);
        for (char *save = NULL, *k = strtok_r(buf, ".", &save); k; k = strtok_r(NULL, ".", &save)) {
                assert_non_null(t);
                e = toml_table_get(t, k);
                if (!e)
                        print_error("no key '%s' in path '%s'\n", k, path);
                assert_non_null(e);
                t = e->value;
        }
        assert_non_null(e);
        return e;
}

static void assert_pos(TomlPos pos, unsigned line, unsigned col) {
        if (pos.line != line || pos.col != col)
                print_error("position %u:%u, expected %u:%u\n", pos.line, pos.col, line, col);
        assert_int_equal(pos.line, line);
        assert_int_equal(pos.col, col);
}

static void test_positions(void **state) {
        (void) state;
        _cleanup_(toml_freep) TomlValue *root = parse_ok("title = \"x\"\n" /* 1 */
                                                         "\"ключ\" = \"значение\" # c\n" /* 2 */
                                                         "s = \"\"\"\n" /* 3 */
                                                         "line \\\n" /* 4 */
                                                         "  \"\"\"\n" /* 5 */
                                                         "after = 42\n" /* 6 */
                                                         "[tbl]\n" /* 7 */
                                                         "  inner = true\n" /* 8 */
                                                         "  \"é\".x = 1\n" /* 9 */
                                                         "arr = [1, [2, 3], {k = \"v\"}]\n" /* 10 */
                                                         "[[aot]]\n" /* 11 */
                                                         "\t\"ü\"= 'ß'   \n"); /* 12 */
        const TomlEntry *e;
        const TomlValue *arr;

        assert_pos(root->pos, 1, 1);

        e = get(root, "title");
        assert_pos(e->key_pos, 1, 1);
        assert_pos(e->value->pos, 1, 9);

        e = toml_table_get(root, "ключ");
        assert_non_null(e);
        assert_pos(e->key_pos, 2, 1);
        assert_pos(e->value->pos, 2, 10); /* columns count code points, not bytes */

        e = get(root, "s");
        assert_pos(e->value->pos, 3, 5);
        assert_string_equal(e->value->str.s, "line ");

        e = get(root, "after"); /* after a multi-line string */
        assert_pos(e->key_pos, 6, 1);
        assert_pos(e->value->pos, 6, 9);

        e = get(root, "tbl");
        assert_pos(e->key_pos, 7, 2);
        assert_pos(e->value->pos, 7, 1);
        e = get(root, "tbl.inner");
        assert_pos(e->key_pos, 8, 3);
        assert_pos(e->value->pos, 8, 11);

        e = toml_table_get(get(root, "tbl")->value, "é");
        assert_non_null(e);
        assert_pos(e->key_pos, 9, 3);
        assert_pos(e->value->pos, 9, 3); /* a table made by a dotted key starts at that key */
        e = toml_table_get(e->value, "x");
        assert_non_null(e);
        assert_pos(e->key_pos, 9, 7);
        assert_pos(e->value->pos, 9, 11);

        arr = get(root, "tbl.arr")->value;
        assert_int_equal(arr->type, TOML_ARRAY);
        assert_pos(arr->pos, 10, 7);
        assert_int_equal(arr->array.n, 3);
        assert_pos(arr->array.items[0]->pos, 10, 8);
        assert_pos(arr->array.items[1]->pos, 10, 11);
        assert_pos(arr->array.items[1]->array.items[1]->pos, 10, 15);
        assert_pos(arr->array.items[2]->pos, 10, 19);
        e = toml_table_get(arr->array.items[2], "k");
        assert_non_null(e);
        assert_pos(e->key_pos, 10, 20);
        assert_pos(e->value->pos, 10, 24);

        e = get(root, "aot");
        assert_pos(e->key_pos, 11, 3);
        assert_pos(e->value->pos, 11, 1);
        assert_int_equal(e->value->array.n, 1);
        assert_pos(e->value->array.items[0]->pos, 11, 1);
        e = toml_table_get(e->value->array.items[0], "ü");
        assert_non_null(e);
        assert_pos(e->key_pos, 12, 2); /* a tab is one column */
        assert_pos(e->value->pos, 12, 7);
        assert_string_equal(e->value->str.s, "ß");
}

static void test_positions_crlf_and_bom(void **state) {
        (void) state;
        _cleanup_(toml_freep) TomlValue *root = parse_ok("\xEF\xBB\xBF"
                                                         "a = 1\r\n"
                                                         "m = '''\r\nx\r\ny'''\r\n"
                                                         "b = 2\r\n");
        const TomlEntry *e;

        e = get(root, "a");
        assert_pos(e->key_pos, 1, 1); /* the byte order mark is not a column */
        e = get(root, "m");
        assert_string_equal(e->value->str.s, "x\ny"); /* CRLF normalised */
        assert_int_equal(e->value->str.len, 3);
        e = get(root, "b");
        assert_pos(e->key_pos, 5, 1);
        assert_pos(e->value->pos, 5, 5);
}

static void test_error_messages(void **state) {
        (void) state;

        expect_error("a = 1\na = 2\n", 2, 1, "duplicate key 'a'");
        expect_error("a 1\n", 1, 3, "expected '=' after key");
        expect_error("[a]\n[a]\n", 2, 2, "duplicate table 'a'");
        expect_error("x = \"abc\n", 1, 5, "unterminated string");
        expect_error("d = 2023-02-29\n", 1, 5, "invalid date '2023-02-29': day out of range");
        expect_error("i = 9223372036854775808\n", 1, 5, "integer '9223372036854775808' out of range");
        expect_error("i = -9223372036854775809\n", 1, 5, "integer '-9223372036854775809' out of range");
        expect_error("\"é\" = \"\xFF\"\n", 1, 8, "invalid UTF-8 (byte 0xFF)");
        expect_error("k = \"\xED\xA0\x80\"\n", 1, 6, "invalid UTF-8 (byte 0xED)"); /* a surrogate */
        expect_error("k = \"\xC0\xAF\"\n", 1, 6, "invalid UTF-8 (byte 0xC0)"); /* overlong '/' */
        expect_error("k = \"\xF4\x90\x80\x80\"\n", 1, 6, "invalid UTF-8 (byte 0xF4)"); /* > U+10FFFF */
        /* After ASCII taken eight bytes at a time and code points of every
         * length: the position is still the line's and its code points'. */
        expect_error("# a comment long enough for eight-byte steps\nk = \"\xC3\xA9\xE2\x82\xAC\xF0\x9D\x84\x9E\" # x\n"
                     "m = \"abcdefgh\xC3\xA9ijklmnop\xFF\"\n",
                     3, 23, "invalid UTF-8 (byte 0xFF)");
        expect_error("s = \"\"\"\nab\n\"\"\" x\n", 3, 5, "expected newline after value, found 'x'");
        expect_error("a = [1,\n 2,\n 3 4]\n", 3, 4, "expected ',' or ']' after array element, found '4'");
        expect_error("a = {b = 1}\na.c = 2\n", 2, 1, "cannot extend inline table 'a'");
        expect_error("[t]\nx.y = 1\n[t.x]\n", 3, 4, "table 't.x' is already defined by dotted keys");
        expect_error("[a.b.c]\n[a]\nb.d = 1\n", 3, 1, "cannot extend table 'b' with dotted keys");
        expect_error("a = []\n[[a]]\n", 2, 3, "cannot extend static array 'a'");
        expect_error("a = \"\\q\"\n", 1, 6, "invalid escape sequence '\\q'");
        expect_error("# c\x01\n", 1, 4, "control character U+0001 is not allowed in a comment");
        expect_error("a = 1\rb = 2\n", 1, 6, "carriage return must be followed by a newline");
        expect_error("a = {x = 1,}\n", 1, 12, "trailing comma is not allowed in an inline table");
        expect_error("a = 0x-1\n", 1, 5, "invalid integer '0x-1'");
        expect_error("a = 1e999\n", 1, 5, "float '1e999' out of range");
        expect_error("a = \"\\uD800\"\n", 1, 6, "invalid escape: U+D800 is not a unicode scalar value");
        expect_error("x = 12:34\n", 1, 5, "invalid time in '12:34': expected HH:MM:SS");
        expect_error("\n\n   = 1\n", 3, 4, "expected a key, found '='");
        expect_error("a = \n", 1, 5, "expected a value, found end of line");
        expect_error("a = tru\n", 1, 5, "invalid value 'tru'");

        /* No error object is fine too. */
        TomlValue *root = NULL;
        assert_int_equal(toml_parse("a =", 3, NULL, &root, NULL), -EINVAL);
        assert_null(root);
}

static void test_document_order(void **state) {
        (void) state;
        _cleanup_(toml_freep) TomlValue *root = parse_ok("z = 1\n"
                                                         "a = 2\n"
                                                         "m.x = 3\n"
                                                         "m.b = 4\n"
                                                         "i = { y = 1, x = 2, w.v = 3 }\n"
                                                         "[b]\n"
                                                         "[[c]]\n"
                                                         "[0]\n"
                                                         "[m2.z.y]\n"
                                                         "[m2]\n");
        static const char *const top[] = { "z", "a", "m", "i", "b", "c", "0", "m2" };
        const TomlValue *v;

        assert_int_equal(root->table.n, ELEMENTSOF(top));
        for (size_t i = 0; i < ELEMENTSOF(top); i++)
                assert_string_equal(root->table.entries[i].key, top[i]);

        v = get(root, "m")->value;
        assert_int_equal(v->table.n, 2);
        assert_string_equal(v->table.entries[0].key, "x");
        assert_string_equal(v->table.entries[1].key, "b");

        v = get(root, "i")->value;
        assert_int_equal(v->table.n, 3);
        assert_string_equal(v->table.entries[0].key, "y");
        assert_string_equal(v->table.entries[1].key, "x");
        assert_string_equal(v->table.entries[2].key, "w");

        /* Defining m2 after its child keeps the child; m2's position moves to its header. */
        v = get(root, "m2")->value;
        assert_int_equal(v->table.n, 1);
        assert_pos(v->pos, 10, 1);
        assert_pos(get(root, "m2")->key_pos, 9, 2);
}

/* Enough keys to use the hash index: order and every lookup must hold. */
static void test_many_keys(void **state) {
        (void) state;
        StrBuf b = STRBUF_INIT;
        _cleanup_free_ char *doc = NULL;
        _cleanup_(toml_freep) TomlValue *root = NULL;
        char key[32];

        for (int i = 999; i >= 0; i--)
                strbuf_printf(&b, "k%d = %d\n", i, i);
        strbuf_puts(&b, "[t]\n");
        doc = strbuf_steal(&b);
        assert_non_null(doc);
        root = parse_ok(doc);

        assert_int_equal(root->table.n, 1001);
        for (int i = 0; i < 1000; i++) {
                const TomlEntry *e;

                snprintf(key, sizeof(key), "k%d", i);
                assert_string_equal(root->table.entries[999 - i].key, key);
                e = toml_table_get(root, key);
                assert_non_null(e);
                assert_ptr_equal(e, &root->table.entries[999 - i]);
                assert_int_equal(e->value->integer, i);
        }
        assert_null(toml_table_get(root, "k1000"));
        assert_null(toml_table_get(root, "k"));

        /* Duplicates are still caught once the index is in use. */
        expect_error_lim("a0=0\na1=1\na2=2\na3=3\na4=4\na5=5\na6=6\na7=7\na8=8\na9=9\na3=3\n", NULL, -EINVAL, 11, 1,
                         "duplicate key 'a3'");
}

static char *nested(const char *open, const char *close, size_t n) {
        StrBuf b = STRBUF_INIT;

        strbuf_puts(&b, "a = ");
        for (size_t i = 0; i < n; i++)
                strbuf_puts(&b, open);
        for (size_t i = 0; i < n; i++)
                strbuf_puts(&b, close);
        strbuf_puts(&b, "\n");
        return strbuf_steal(&b);
}

static void test_limit_depth(void **state) {
        (void) state;
        const TomlLimits three = { .max_depth = 3 }, huge = { .max_depth = SIZE_MAX };
        _cleanup_free_ char *ok = nested("[", "]", 128), *deep = nested("[", "]", 129),
                            *deep_inline = nested("{b=", "}", 129), *very_deep = nested("[", "]", 5000);
        TomlValue *root;

        assert_non_null(ok);
        assert_non_null(deep);
        assert_non_null(deep_inline);
        assert_non_null(very_deep);

        /* a's array is level 1, the innermost level 128: allowed by default. */
        root = parse_ok(ok);
        toml_free(root);
        expect_error_lim(deep, NULL, -E2BIG, 1, 133, "nesting too deep (limit 128)");
        /* the key inside the 128th inline table would be level 129 */
        expect_error_lim(deep_inline, NULL, -E2BIG, 1, 6 + 3 * 127, "nesting too deep (limit 128)");

        /* A caller cannot ask for a stack overflow. */
        expect_error_lim(very_deep, &huge, -E2BIG, 1, 5 + TOML_DEPTH_HARD_MAX, "nesting too deep (limit 1024)");

        root = parse_ok_lim("a.b.c = 1\n", &three);
        toml_free(root);
        expect_error_lim("a.b.c.d = 1\n", &three, -E2BIG, 1, 7, "nesting too deep (limit 3)");
        expect_error_lim("[a.b.c.d]\n", &three, -E2BIG, 1, 8, NULL);
        expect_error_lim("[a.b]\nc.d = 1\n", &three, -E2BIG, 2, 3, NULL);
        root = parse_ok_lim("a = {b = {c = {}}}\n", &three);
        toml_free(root);
        expect_error_lim("a = {b = {c = {d = 1}}}\n", &three, -E2BIG, 1, 16, NULL);
        expect_error_lim("a = [[[1]]]\n", &three, -E2BIG, 1, 8, NULL);
        /* An array-of-tables element is a level of its own. */
        root = parse_ok_lim("[[a]]\n[a.b]\n", &(const TomlLimits){ .max_depth = 3 });
        toml_free(root);
        expect_error_lim("[[a]]\n[a.b]\n", &(const TomlLimits){ .max_depth = 2 }, -E2BIG, 2, 4, NULL);
}

static void test_limit_string(void **state) {
        (void) state;
        const TomlLimits eight = { .max_string = 8 };
        TomlValue *root;
        char *big;
        size_t n = 1024 * 1024;

        root = parse_ok_lim("s = '12345678'\n", &eight);
        toml_free(root);
        expect_error_lim("s = '123456789'\n", &eight, -E2BIG, 1, 5, "string longer than 8 bytes");
        expect_error_lim("s = \"\"\"\n123456789\"\"\"\n", &eight, -E2BIG, 1, 5, NULL);
        /* The limit applies after unescaping: four two-byte characters fit, five do not. */
        root = parse_ok_lim("s = \"\\u00e9\\u00e9\\u00e9\\u00e9\"\n", &eight);
        assert_int_equal(get(root, "s")->value->str.len, 8);
        toml_free(root);
        expect_error_lim("s = \"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\"\n", &eight, -E2BIG, 1, 5, NULL);
        /* Keys too. */
        expect_error_lim("'123456789' = 1\n", &eight, -E2BIG, 1, 1, NULL);
        expect_error_lim("abcdefghi = 1\n", &eight, -E2BIG, 1, 1, "key longer than 8 bytes");

        /* The default is 1 MiB. */
        big = malloc(n + 16);
        assert_non_null(big);
        memcpy(big, "s = '", 5);
        memset(big + 5, 'x', n);
        memcpy(big + 5 + n, "'\n", 2);
        root = parse_ok_n(big, n + 7, NULL);
        assert_int_equal(get(root, "s")->value->str.len, n);
        toml_free(root);
        memcpy(big + 5 + n, "x'\n", 3);
        expect_error_n(big, n + 8, NULL, -E2BIG, 1, 5, "string longer than 1048576 bytes");
        free(big);
}

static void test_table_get(void **state) {
        (void) state;
        _cleanup_(toml_freep) TomlValue *root = parse_ok("a = 1\n"
                                                         "\"\" = 2\n"
                                                         "[t]\n"
                                                         "'x.y' = 3\n");
        const TomlEntry *e;

        e = toml_table_get(root, "a");
        assert_non_null(e);
        assert_string_equal(e->key, "a");
        assert_int_equal(e->key_len, 1);
        assert_int_equal(e->value->type, TOML_INTEGER);
        assert_int_equal(e->value->integer, 1);

        e = toml_table_get(root, "");
        assert_non_null(e);
        assert_int_equal(e->value->integer, 2);

        e = toml_table_get(get(root, "t")->value, "x.y"); /* a quoted key with a dot is one key */
        assert_non_null(e);
        assert_int_equal(e->value->integer, 3);

        assert_null(toml_table_get(root, "b"));
        assert_null(toml_table_get(root, "A"));
        assert_null(toml_table_get(root, "x.y"));
        assert_null(toml_table_get(get(root, "a")->value, "a")); /* not a table */
        assert_null(toml_table_get(NULL, "a"));
        assert_null(toml_table_get(root, NULL));
        assert_null(toml_table_get_n(root, "ab", 2));
        assert_ptr_equal(toml_table_get_n(root, "ab", 1), toml_table_get(root, "a"));
}

static void test_nul(void **state) {
        (void) state;
        _cleanup_(toml_freep) TomlValue *root = parse_ok("s = \"a\\u0000b\"\n"
                                                         "m = \"\"\"\\u0000\"\"\"\n"
                                                         "\"k\\u0000x\" = 1\n");
        const TomlEntry *e;

        e = get(root, "s");
        assert_int_equal(e->value->type, TOML_STRING);
        assert_int_equal(e->value->str.len, 3);
        assert_memory_equal(e->value->str.s, "a\0b", 4); /* and NUL-terminated */

        e = get(root, "m");
        assert_int_equal(e->value->str.len, 1);
        assert_int_equal(e->value->str.s[0], 0);

        assert_null(toml_table_get(root, "k"));
        e = toml_table_get_n(root, "k\0x", 3);
        assert_non_null(e);
        assert_int_equal(e->key_len, 3);
        assert_memory_equal(e->key, "k\0x", 4);

        /* A literal NUL byte is a control character, whatever the string kind. */
        expect_error_n("s = 'a\0b'\n", 10, NULL, -EINVAL, 1, 7, "control character U+0000 is not allowed in a string");
        expect_error_n("s = \"a\0b\"\n", 10, NULL, -EINVAL, 1, 7, NULL);
        expect_error_n("a = 1\0\n", 7, NULL, -EINVAL, 1, 6, NULL);
}

static void test_values(void **state) {
        (void) state;
        _cleanup_(toml_freep) TomlValue *root = parse_ok("i1 = 0xDEAD_beef\n"
                                                         "i2 = 0o755\n"
                                                         "i3 = 0b1010\n"
                                                         "i4 = -9_223_372_036_854_775_808\n"
                                                         "i5 = +9223372036854775807\n"
                                                         "f1 = 0.1\n"
                                                         "f2 = -0.0\n"
                                                         "f3 = 1e308\n"
                                                         "f4 = -inf\n"
                                                         "f5 = nan\n"
                                                         "f6 = 6.626e-34\n"
                                                         "b = false\n"
                                                         "d1 = 1979-05-27T00:32:00.999999999999-07:00\n"
                                                         "d2 = 1979-05-27 07:32:00z\n"
                                                         "d3 = 2024-02-29T23:59:60\n"
                                                         "d4 = 2000-02-29\n"
                                                         "d5 = 00:00:00.5\n"
                                                         "s1 = \"\"\"\nfoo \\\n\n   bar\"\"\"\"\"\n"
                                                         "s2 = 'C:\\x'\n");
        const TomlValue *v;

        assert_int_equal(get(root, "i1")->value->integer, 0xDEADBEEF);
        assert_int_equal(get(root, "i2")->value->integer, 0755);
        assert_int_equal(get(root, "i3")->value->integer, 10);
        assert_true(get(root, "i4")->value->integer == INT64_MIN);
        assert_true(get(root, "i5")->value->integer == INT64_MAX);

        assert_int_equal(get(root, "f1")->value->type, TOML_FLOAT);
        assert_true(get(root, "f1")->value->flt == 0.1);
        assert_true(get(root, "f2")->value->flt == 0.0 && signbit(get(root, "f2")->value->flt));
        assert_true(get(root, "f3")->value->flt == 1e308);
        assert_true(isinf(get(root, "f4")->value->flt) && get(root, "f4")->value->flt < 0);
        assert_true(isnan(get(root, "f5")->value->flt));
        assert_true(get(root, "f6")->value->flt == 6.626e-34);

        assert_int_equal(get(root, "b")->value->type, TOML_BOOL);
        assert_false(get(root, "b")->value->boolean);

        v = get(root, "d1")->value;
        assert_int_equal(v->type, TOML_DATETIME);
        assert_int_equal(v->dt.year, 1979);
        assert_int_equal(v->dt.month, 5);
        assert_int_equal(v->dt.day, 27);
        assert_int_equal(v->dt.hour, 0);
        assert_int_equal(v->dt.minute, 32);
        assert_int_equal(v->dt.nanosecond, 999999999); /* truncated, not rounded */
        assert_int_equal(v->dt.offset_minutes, -7 * 60);
        v = get(root, "d2")->value;
        assert_int_equal(v->type, TOML_DATETIME);
        assert_int_equal(v->dt.hour, 7);
        assert_int_equal(v->dt.offset_minutes, 0);
        v = get(root, "d3")->value;
        assert_int_equal(v->type, TOML_DATETIME_LOCAL);
        assert_int_equal(v->dt.second, 60);
        v = get(root, "d4")->value;
        assert_int_equal(v->type, TOML_DATE_LOCAL);
        assert_int_equal(v->dt.day, 29);
        v = get(root, "d5")->value;
        assert_int_equal(v->type, TOML_TIME_LOCAL);
        assert_int_equal(v->dt.nanosecond, 500000000);

        assert_string_equal(get(root, "s1")->value->str.s, "foo bar\"\"");
        assert_string_equal(get(root, "s2")->value->str.s, "C:\\x");

        /* Calendar checks. */
        expect_error("d = 1900-02-29\n", 1, 5, "invalid date '1900-02-29': day out of range");
        expect_error("d = 2023-04-31\n", 1, 5, "invalid date '2023-04-31': day out of range");
        expect_error("d = 2023-13-01\n", 1, 5, "invalid date '2023-13-01': month out of range");
        expect_error("d = 2023-01-01T24:00:00\n", 1, 5, NULL);
        expect_error("d = 2023-01-01T00:00:00+24:00\n", 1, 5, NULL);
        expect_error("d = 12:00:00Z\n", 1, 5, NULL);
}

/* Floats must not depend on LC_NUMERIC. Needs a locale with a decimal comma. */
static void test_float_locale(void **state) {
        (void) state;
        static const char *const names[] = { "de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "nl_NL.UTF-8" };
        const char *set = NULL;

        for (size_t i = 0; i < ELEMENTSOF(names) && !set; i++)
                set = setlocale(LC_NUMERIC, names[i]);
        if (!set)
                fail_msg("no decimal-comma locale (de_DE.UTF-8) is installed; scripts/setup.sh --test-user "
                         "(run by make check) generates it");
        TomlValue *root = parse_ok("f = 1.5\n");
        setlocale(LC_NUMERIC, "C");
        assert_true(get(root, "f")->value->flt == 1.5);
        toml_free(root);
}

static void test_redefinition(void **state) {
        (void) state;
        static const char *const valid[] = {
                "[fruit]\napple.color = 'red'\napple.taste.sweet = true\n[fruit.apple.texture]\nsmooth = true\n",
                "[x.y.z.w]\n[x]\n",
                "[[a]]\n[a.b]\n[[a]]\n[a.b]\n",
                "[[a.b]]\n[[a.b]]\n[a]\n",
                "a.b = 1\na.c = 2\n",
                "a = { b.c = 1, b.d = 2 }\n",
        };
        static const char *const invalid[] = {
                "[fruit]\napple.color = 'red'\n[fruit.apple]\n",
                "[a]\n[a]\n",
                "a = 1\n[a]\n",
                "[a]\n[[a]]\n",
                "[[a]]\n[a]\n",
                "a = {}\n[a.b]\n",
                "a = { b = {} }\n[[a.b]]\n",
                "a = [{}]\n[a.b]\n",
                "a.b = 1\n[a]\n",
                "a = { b = 1, b.c = 2 }\n",
                "[a.b]\n[a]\nb = 1\n",
                "[[a.b]]\n[a]\nb.c = 1\n",
        };

        for (size_t i = 0; i < ELEMENTSOF(valid); i++) {
                TomlValue *root = parse_ok(valid[i]);
                toml_free(root);
        }
        for (size_t i = 0; i < ELEMENTSOF(invalid); i++) {
                TomlValue *root = NULL;
                TomlError e = {};
                int r = toml_parse(invalid[i], strlen(invalid[i]), NULL, &root, &e);
                if (r != -EINVAL)
                        print_error("accepted: %s\n", invalid[i]);
                assert_int_equal(r, -EINVAL);
                assert_null(root);
        }
}

static void test_misc(void **state) {
        (void) state;
        TomlValue *root;

        assert_string_equal(toml_type_to_string(TOML_STRING), "string");
        assert_string_equal(toml_type_to_string(TOML_DATETIME_LOCAL), "datetime-local");
        assert_string_equal(toml_type_to_string(TOML_TABLE), "table");
        assert_null(toml_type_to_string(_TOML_TYPE_MAX));
        assert_null(toml_type_to_string(_TOML_TYPE_INVALID));

        assert_null(toml_free(NULL));

        root = parse_ok_n(NULL, 0, NULL);
        assert_int_equal(root->table.n, 0);
        toml_free(root);
        root = parse_ok("# only a comment");
        assert_int_equal(root->table.n, 0);
        toml_free(root);

        /* The input need not be NUL-terminated: only len bytes are read. */
        root = parse_ok_n("a = 12345", 6, NULL);
        assert_int_equal(get(root, "a")->value->integer, 12);
        toml_free(root);
}

/* A value shown on a terminal (config show, lazaret trust) cannot repaint
 * it: C1 controls, bidi marks and invisible characters are TOML escapes,
 * and the text parses back to the same value (issue 40, item 6). */
static void test_write_inert(void **state) {
        (void) state;
        static const char doc[] = "v = \"a\\u009b2Jb\\u202Ec\\u2066d\\u200Be\\U000E0041f\\u001bg caf\\u00e9 \\\\\"\n";
        _cleanup_(toml_freep) TomlValue *root = NULL;
        TomlError e = {};
        assert_int_equal(toml_parse(doc, sizeof(doc) - 1, NULL, &root, &e), 0);
        const TomlValue *v = toml_table_get(root, "v")->value;
        StrBuf b = STRBUF_INIT;
        toml_write_value(&b, v);
        assert_string_equal(strbuf_str(&b),
                            "\"a\\u009b2Jb\\u202ec\\u2066d\\u200be\\U000e0041f\\u001bg caf\xc3\xa9 \\\\\"");
        for (const unsigned char *c = (const unsigned char *) strbuf_str(&b); *c; c++)
                assert_true(*c >= 0x20 && *c != 0x7f && *c != 0xc2); /* no C0, no U+0080..U+00BF */
        /* It parses back to the same value. */
        StrBuf d = STRBUF_INIT;
        strbuf_printf(&d, "v = %s\n", strbuf_str(&b));
        _cleanup_(toml_freep) TomlValue *again = NULL;
        assert_int_equal(toml_parse(strbuf_str(&d), d.len, NULL, &again, &e), 0);
        assert_true(toml_value_equal(toml_table_get(again, "v")->value, v));
        strbuf_done(&b);
        strbuf_done(&d);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_positions),      cmocka_unit_test(test_positions_crlf_and_bom),
                cmocka_unit_test(test_error_messages), cmocka_unit_test(test_document_order),
                cmocka_unit_test(test_many_keys),      cmocka_unit_test(test_write_inert),
                cmocka_unit_test(test_limit_depth),    cmocka_unit_test(test_limit_string),
                cmocka_unit_test(test_table_get),      cmocka_unit_test(test_nul),
                cmocka_unit_test(test_values),         cmocka_unit_test(test_float_locale),
                cmocka_unit_test(test_redefinition),   cmocka_unit_test(test_misc),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
