/* SPDX-License-Identifier: MIT */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "fd-util.h"
#include "macro.h"
#include "path-pattern.h"

const char *const path_pattern_protect_default[] = {
        "lazaret.toml",
        ".vscode/",
        ".idea/",
        ".devcontainer/",
        ".envrc",
        ".claude/",
        ".cursor/",
        ".pre-commit-config.yaml",
        ".npmrc",
        ".git",
        /* The configuration of the agents the presets install, which run
         * the commands it names (MCP servers, hooks, plugins, lint and test
         * commands) when the person runs them on the host (issue 40). */
        ".mcp.json",
        ".gemini/",
        ".codex/",
        "opencode.json",
        "opencode.jsonc",
        ".opencode/",
        ".aider.conf.yml",
        NULL,
};

const char *const path_pattern_mask_default[] = {
        ".env",   ".env.*", "*.pem",   "*.key", "id_rsa*", "id_ed25519*",
        ".netrc", ".npmrc", ".pypirc", ".aws/", ".ssh/",   ".docker/config.json",
        NULL,
};

size_t path_pattern_count(const char *const *list) {
        size_t n = 0;
        while (list && list[n])
                n++;
        return n;
}

typedef struct Pattern {
        char buf[PATH_PATTERN_MAX + 1]; /* the pattern with each '/' made a NUL */
        const char *comp[PATH_PATTERN_COMPONENTS_MAX];
        size_t n;
        bool anchored;
} Pattern;

static const char *pattern_parse(const char *pattern, Pattern *p) {
        if (!pattern || !*pattern)
                return "empty";
        size_t len = strnlen(pattern, PATH_PATTERN_MAX + 1);
        if (len > PATH_PATTERN_MAX)
                return "longer than 1024 bytes";
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) pattern[i];
                if (c < 0x20 || c == 0x7f)
                        return "a control character";
        }

        const char *s = pattern;
        p->anchored = s[0] == '/';
        if (p->anchored) {
                s++;
                len--;
        }
        if (len > 0 && s[len - 1] == '/') /* names a directory: matches the same */
                len--;
        if (len == 0)
                return "'/' alone names no file";
        memcpy(p->buf, s, len);
        p->buf[len] = '\0';

        p->n = 0;
        for (char *c = p->buf;;) {
                char *slash = strchr(c, '/');
                if (slash)
                        *slash = '\0';
                if (!*c)
                        return "an empty component (a//b)";
                if (strcmp(c, ".") == 0 || strcmp(c, "..") == 0)
                        return "a '.' or '..' component";
                if (p->n == PATH_PATTERN_COMPONENTS_MAX)
                        return "more than 32 components";
                p->comp[p->n++] = c;
                if (!slash)
                        break;
                c = slash + 1;
        }
        return NULL;
}

const char *path_pattern_problem(const char *pattern) {
        Pattern p;
        return pattern_parse(pattern, &p);
}

/* Does some run of p->n consecutive components of v[0..n) (the first, when
 * anchored) match p's components one by one? */
static bool pattern_match(const Pattern *p, char *const *v, size_t n) {
        if (n < p->n)
                return false;
        size_t last = p->anchored ? 0 : n - p->n;
        for (size_t i = 0; i <= last; i++) {
                size_t j = 0;
                while (j < p->n && fnmatch(p->comp[j], v[i + j], 0) == 0)
                        j++;
                if (j == p->n)
                        return true;
        }
        return false;
}

bool path_pattern_match_any(const char *rel, const char *const *patterns, size_t n) {
        if (!rel || n == 0)
                return false;

        /* The path split into NUL-terminated components, on the stack when
         * it is short (as nearly every path is). */
        size_t len = strlen(rel);
        char stack_buf[512];
        char *stack_v[64];
        _cleanup_free_ char *heap_buf = NULL;
        _cleanup_free_ char **heap_v = NULL;
        char *buf = stack_buf;
        char **v = stack_v;
        if (len >= sizeof stack_buf || len / 2 + 1 > ELEMENTSOF(stack_v)) {
                heap_buf = malloc(len + 1);
                heap_v = calloc(len / 2 + 1, sizeof(char *));
                if (!heap_buf || !heap_v)
                        return true;
                buf = heap_buf;
                v = heap_v;
        }
        memcpy(buf, rel, len + 1);
        size_t nv = 0;
        for (char *c = buf; *c;) {
                char *slash = strchr(c, '/');
                if (slash)
                        *slash = '\0';
                if (*c)
                        v[nv++] = c;
                if (!slash)
                        break;
                c = slash + 1;
        }
        if (nv == 0)
                return false;

        for (size_t i = 0; i < n; i++) {
                Pattern p;
                if (pattern_parse(patterns[i], &p))
                        continue;
                if (pattern_match(&p, v, nv))
                        return true;
        }
        return false;
}
