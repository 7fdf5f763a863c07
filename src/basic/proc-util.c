/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fd-util.h"
#include "fileio.h"
#include "proc-util.h"

int proc_children(pid_t pid, pid_t tid, pid_t **ret, size_t *ret_n) {
        char path[64];
        _cleanup_free_ char *text = NULL;
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int) pid, (int) tid);
        int r = read_file_capped(path, 65536, &text, NULL);
        if (r < 0)
                return r;
        size_t n = 0, cap = 0;
        pid_t *v = NULL;
        for (char *p = text, *end;; p = end) {
                long x = strtol(p, &end, 10);
                if (end == p)
                        break;
                if (x <= 0)
                        continue;
                if (n == cap) {
                        size_t c = cap ? cap * 2 : 8;
                        pid_t *nv = realloc(v, c * sizeof(*v));
                        if (!nv) {
                                free(v);
                                return -ENOMEM;
                        }
                        v = nv;
                        cap = c;
                }
                v[n++] = (pid_t) x;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
