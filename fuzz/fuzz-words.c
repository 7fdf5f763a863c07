/* SPDX-License-Identifier: MIT */
/* Fuzz the shell-words splitter and the metacharacter check: any bytes
 * either split or are refused with a reason, never crash; the words never
 * hold more bytes than the input; a metacharacter-free input with no
 * quotes or backslashes splits exactly at the whitespace. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "words.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 8192)
                return 0;
        const char *s = (const char *) data;
        const char *m = words_metachar(s, size);
        assert(!m || (m >= s && m < s + size));

        char **v = NULL;
        size_t n = 0;
        const char *why = NULL;
        int r = words_split(s, size, &v, &n, &why);
        if (r < 0) {
                assert(r == -ENOMEM || why);
                return 0;
        }
        size_t total = 0;
        for (size_t i = 0; i < n; i++) {
                assert(v[i]);
                total += strlen(v[i]);
        }
        assert(!v[n]);
        assert(total <= size);
        if (!m && !memchr(s, '\'', size) && !memchr(s, '"', size)) {
                /* Plain words: their bytes are the input's non-space bytes. */
                size_t plain = 0;
                for (size_t i = 0; i < size; i++)
                        plain += s[i] != ' ';
                assert(total == plain);
        }
        words_free(v);
        return 0;
}
