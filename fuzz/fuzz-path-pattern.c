/* SPDX-License-Identifier: MIT */
/* Fuzz path patterns: the input is a pattern, then optionally a NUL and a
 * path (else the pattern is matched against itself). Checking and matching
 * never crash; a refused pattern matches nothing and its reason is one line;
 * what matches, everything beneath it matches too, and so does the same
 * path one level down for a pattern that is not anchored; a pattern without
 * glob characters matches the path it spells. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "path-pattern.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool match1(const char *rel, const char *pattern) {
        return path_pattern_match_any(rel, (const char *const[]){ pattern }, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 4096)
                return 0;
        char *buf = malloc(size + 1), *below = malloc(size + 8), *deeper = malloc(size + 8), *spelt = malloc(size + 1);
        if (!buf || !below || !deeper || !spelt)
                goto out;
        memcpy(buf, data, size);
        buf[size] = '\0';
        const char *pattern = buf;
        size_t plen = strlen(pattern);
        const char *rel = plen < size ? buf + plen + 1 : pattern;

        const char *why = path_pattern_problem(pattern);
        (void) path_pattern_match_any(rel, path_pattern_protect_default,
                                      path_pattern_count(path_pattern_protect_default));
        (void) path_pattern_match_any(rel, path_pattern_mask_default, path_pattern_count(path_pattern_mask_default));
        if (why) {
                size_t n = strlen(why);
                if (n == 0 || strchr(why, '\n') || why[n - 1] == '.' || match1(rel, pattern))
                        abort();
                goto out;
        }
        if (plen == 0 || plen > PATH_PATTERN_MAX)
                abort();
        for (size_t i = 0; i < plen; i++)
                if ((unsigned char) pattern[i] < 0x20 || pattern[i] == 0x7f)
                        abort();

        if (match1(rel, pattern)) {
                strcpy(below, rel);
                strcat(below, "/x");
                if (!match1(below, pattern))
                        abort();
                if (pattern[0] != '/') {
                        strcpy(deeper, "d/");
                        strcat(deeper, rel);
                        if (!match1(deeper, pattern))
                                abort();
                }
        }
        if (!strpbrk(pattern, "*?[\\")) {
                const char *s = pattern + (pattern[0] == '/');
                strcpy(spelt, s);
                if (!match1(spelt, pattern))
                        abort();
        }
out:
        free(buf);
        free(below);
        free(deeper);
        free(spelt);
        return 0;
}
