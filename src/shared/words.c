/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "words.h"

const char *words_metachar(const char *s, size_t len) {
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c < 0x20 || c == 0x7f || strchr(";|&$()`><\\", c))
                        return s + i;
        }
        return NULL;
}

void words_free(char **v) {
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

typedef struct Out {
        char **v;
        size_t n, cap;
        char *word; /* the word being built: len bytes in a buffer of len + 1 at least */
        size_t len;
        bool in_word; /* a word has started (it may be empty: '') */
} Out;

static int emit(Out *o) {
        if (o->n + 2 > o->cap) {
                size_t cap = o->cap ? o->cap * 2 : 8;
                char **nv = realloc(o->v, cap * sizeof(char *));
                if (!nv)
                        return -ENOMEM;
                o->v = nv;
                o->cap = cap;
        }
        o->word[o->len] = '\0';
        o->v[o->n++] = o->word;
        o->v[o->n] = NULL;
        o->word = NULL;
        o->len = 0;
        o->in_word = false;
        return 0;
}

static bool is_space(char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int words_split(const char *s, size_t len, char ***ret, size_t *ret_n, const char **ret_why) {
        Out o = {};
        int r = 0;
        *ret_why = NULL;
        o.v = calloc(1, sizeof(char *));
        if (!o.v)
                return -ENOMEM;
        o.cap = 1;
        for (size_t i = 0; i < len && r >= 0; i++) {
                char c = s[i];
                if (c == '\0') {
                        *ret_why = "a NUL byte";
                        r = -EINVAL;
                        break;
                }
                if (is_space(c)) {
                        if (o.in_word)
                                r = emit(&o);
                        continue;
                }
                if (!o.in_word) {
                        /* No word is longer than the rest of the input. */
                        o.word = malloc(len - i + 1);
                        if (!o.word) {
                                r = -ENOMEM;
                                break;
                        }
                        o.len = 0;
                        o.in_word = true;
                }
                if (c == '\\') {
                        if (i + 1 >= len) {
                                *ret_why = "nothing after the backslash";
                                r = -EINVAL;
                                break;
                        }
                        o.word[o.len++] = s[++i];
                } else if (c == '\'' || c == '"') {
                        size_t j = i + 1;
                        for (; j < len && s[j] != c; j++) {
                                if (s[j] == '\0')
                                        break;
                                /* In double quotes a backslash escapes only " and \. */
                                if (c == '"' && s[j] == '\\' && j + 1 < len && (s[j + 1] == '"' || s[j + 1] == '\\'))
                                        j++;
                                o.word[o.len++] = s[j];
                        }
                        if (j < len && s[j] == '\0') {
                                *ret_why = "a NUL byte";
                                r = -EINVAL;
                                break;
                        }
                        if (j >= len) {
                                *ret_why = "no closing quotation";
                                r = -EINVAL;
                                break;
                        }
                        i = j;
                } else
                        o.word[o.len++] = c;
        }
        if (r >= 0 && o.in_word)
                r = emit(&o);
        free(o.word);
        if (r < 0) {
                words_free(o.v);
                return r;
        }
        *ret = o.v;
        *ret_n = o.n;
        return 0;
}
