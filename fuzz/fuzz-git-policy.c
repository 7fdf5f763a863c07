/* SPDX-License-Identifier: MIT */
/* Fuzz the git router's policy: normalize and check never crash, check
 * agrees with normalize about what is a valid path, and no operation other
 * than a read is ever allowed on a path below config, packed-refs or
 * objects/info. The first byte picks the operation and the policy. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "git-policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_one(const GitPolicy *p, const char *rel, GitOp op) {
        int e = 0;
        GitDecision d = git_policy_check(p, rel, op, &e);
        if (d == GIT_DECISION_DENY && (e <= 0 || e > 4095))
                abort();
        if (d != GIT_DECISION_ALLOW || op == GIT_OP_READ)
                return;
        /* "objects/info" as a whole segment: "objects/infos/x" is an
         * ordinary objects path (a fuzzer finding against an earlier,
         * too-wide version of this check). */
        if (!strcmp(rel, "config") || !strcmp(rel, "packed-refs") || !strcmp(rel, "objects/info") ||
            !strncmp(rel, "objects/info/", 13) || !strcmp(rel, "commondir") || !strncmp(rel, "refs/tags/", 10))
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1 || size > 8192)
                return 0;
        uint8_t sel = data[0];
        char *in = malloc(size);
        if (!in)
                return 0;
        memcpy(in, data + 1, size - 1);
        in[size - 1] = '\0';

        GitPolicy p = {
                .worktree = (sel & 0x40) ? NULL : ((sel & 0x80) ? "agent" : "a/b"),
                .allow_main_head = sel & 0x20,
        };
        GitOp op = (GitOp) ((sel & 0x1f) % (_GIT_OP_MAX + 1)); /* includes one invalid value */

        char *rel = NULL;
        int r = git_policy_normalize(in, &rel);
        if (r == 0) {
                for (GitOp o = 0; o < _GIT_OP_MAX; o++)
                        check_one(&p, rel, o);
                check_one(&p, rel, op);
                (void) git_policy_rename_noreplace(rel);
                free(rel);
        } else if (r != -22 && r != -36 /* ENAMETOOLONG */ && r != -12)
                abort();
        /* The raw input too: whatever it is, check must not crash. */
        int e = 0;
        (void) git_policy_check(&p, in, op, &e);
        free(in);
        return 0;
}
