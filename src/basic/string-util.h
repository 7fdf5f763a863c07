/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <string.h>

static inline bool streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}

/* If s begins with prefix, return the rest of s, else NULL. */
static inline const char *startswith(const char *s, const char *prefix) {
        size_t l = strlen(prefix);
        return strncmp(s, prefix, l) == 0 ? s + l : NULL;
}

/* strdup that treats NULL as NULL. */
char *strdup_or_null(const char *s);
