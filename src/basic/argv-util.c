/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "argv-util.h"
#include "strbuf.h"

void argv_add(Argv *a, const char *s) {
        if (a->oom)
                return;
        if (a->n + 2 > a->cap) {
                size_t cap = a->cap ? a->cap * 2 : 32;
                char **n = realloc(a->v, cap * sizeof(char *));
                if (!n) {
                        a->oom = true;
                        return;
                }
                a->v = n;
                a->cap = cap;
        }
        a->v[a->n] = strdup(s);
        if (!a->v[a->n]) {
                a->oom = true;
                return;
        }
        a->v[++a->n] = NULL;
}

void argv_addf(Argv *a, const char *fmt, ...) {
        StrBuf b = STRBUF_INIT;
        va_list ap;
        va_start(ap, fmt);
        strbuf_vprintf(&b, fmt, ap);
        va_end(ap);
        char *s = strbuf_steal(&b);
        if (!s) {
                a->oom = true;
                return;
        }
        argv_add(a, s);
        free(s);
}

void argv_done(Argv *a) {
        for (size_t i = 0; i < a->n; i++)
                free(a->v[i]);
        free(a->v);
        *a = (Argv){};
}
