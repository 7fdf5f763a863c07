/* SPDX-License-Identifier: MIT */
/* For tests/words-oracle.py: reads a JSON array of strings on stdin and
 * prints, for each, {"words": [...]} or {"error": "..."} from words_split,
 * as one JSON array. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "words.h"

int main(void) {
        json_error_t e;
        json_t *in = json_loadf(stdin, JSON_ALLOW_NUL, &e);
        if (!json_is_array(in)) {
                fprintf(stderr, "words-tool: %s\n", e.text);
                return 2;
        }
        json_t *out = json_array();
        size_t i;
        json_t *s;
        json_array_foreach(in, i, s) {
                char **v = NULL;
                size_t n = 0;
                const char *why = NULL;
                int r = words_split(json_string_value(s), json_string_length(s), &v, &n, &why);
                json_t *res;
                if (r < 0)
                        res = json_pack("{s:s}", "error", why ? why : "?");
                else {
                        json_t *a = json_array();
                        for (size_t k = 0; k < n; k++)
                                json_array_append_new(a, json_string(v[k]));
                        res = json_pack("{s:o}", "words", a);
                }
                json_array_append_new(out, res);
                words_free(v);
        }
        json_dumpf(out, stdout, JSON_COMPACT | JSON_ENSURE_ASCII);
        putchar('\n');
        json_decref(in);
        json_decref(out);
        return 0;
}
