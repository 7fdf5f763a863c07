/* SPDX-License-Identifier: MIT */
/* Fuzz the configuration's expansion engine: any input either expands or is
 * refused with a message, never crashes; with every token allowed and no
 * tilde, an input without braces comes back unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "expand.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size > 4096)
                return 0;
        char *in = malloc(size + 1);
        if (!in)
                return 0;
        memcpy(in, data, size);
        in[size] = '\0';

        ExpandContext ctx = { .home = "/home/u" };
        ctx.values[EXPAND_PROFILE_NAME] = "claude";
        ctx.values[EXPAND_PROFILE_DIR] = "/data/claude";
        ctx.values[EXPAND_DOMAIN_HASH] = "0123456789ab";
        ctx.values[EXPAND_DOMAIN_DIR] = "/data/domains/0123456789ab";
        ctx.values[EXPAND_WORKSPACE_DIR] = "/w";
        /* Alternate between all tokens allowed and none allowed. */
        if (size > 0 && (data[0] & 1))
                for (int t = 0; t < _EXPAND_TOKEN_MAX; t++)
                        ctx.values[t] = NULL;

        char *out = NULL, *err = NULL;
        int r = expand_string(in, &ctx, &out, &err);
        if (r == 0) {
                if (!strpbrk(in, "{}~") && strcmp(out, in) != 0)
                        abort();
                free(out);
        } else if (r == -22 /* EINVAL */) {
                if (!err || !*err)
                        abort();
                free(err);
        }
        free(in);
        return 0;
}
