/* SPDX-License-Identifier: MIT */
#pragma once

/* Building argument vectors: every string copied, allocation failure
 * remembered (oom) and checked once at the end, like StrBuf. */

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

typedef struct Argv {
        char **v; /* NULL-terminated once anything was added */
        size_t n, cap;
        bool oom;
} Argv;

void argv_add(Argv *a, const char *s);
void argv_addf(Argv *a, const char *fmt, ...) _printf_(2, 3);
void argv_done(Argv *a);
