/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "path-util.h"
#include "strbuf.h"

bool path_has_dotdot(const char *path) {
        const char *p = path;
        while (*p) {
                size_t n = strcspn(p, "/");
                if (n == 2 && p[0] == '.' && p[1] == '.')
                        return true;
                p += n;
                while (*p == '/')
                        p++;
        }
        return false;
}

char *path_join(const char *a, const char *b) {
        StrBuf s = STRBUF_INIT;
        size_t la = strlen(a);
        while (la > 1 && a[la - 1] == '/')
                la--;
        strbuf_putn(&s, a, la);
        while (*b == '/')
                b++;
        if (la == 0 || a[la - 1] != '/')
                strbuf_putc(&s, '/');
        strbuf_puts(&s, b);
        return strbuf_steal(&s);
}

int path_canonicalize(const char *path, char **ret) {
        char *r = realpath(path, NULL);
        if (!r)
                return negative_errno();
        *ret = r;
        return 0;
}
