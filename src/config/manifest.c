/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "expand.h"
#include "fd-util.h"
#include "fileio.h"
#include "manifest.h"
#include "path-util.h"
#include "string-util.h"
#include "workspace-trust.h"

/* One error, "PATH:LINE:COL: message" (no position: "PATH: message"). */
_printf_(4, 5) static int fail(char **ret_error, const char *path, const TomlPos *pos, const char *fmt, ...) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        int k = pos ? asprintf(ret_error, "%s:%u:%u: %s", path, pos->line, pos->col, msg)
                    : asprintf(ret_error, "%s: %s", path, msg);
        if (k < 0)
                *ret_error = NULL;
        return -EINVAL;
}

/* A string without NUL bytes, or NULL. */
static const char *plain_string(const TomlValue *v) {
        if (v->type != TOML_STRING || strlen(v->str.s) != v->str.len)
                return NULL;
        return v->str.s;
}

static void agent_done(ManifestAgent *a) {
        free(a->name);
        free(a->profile);
        for (size_t i = 0; a->argv && i < a->argc; i++)
                free(a->argv[i]);
        free(a->argv);
        free(a->workspace);
        *a = (ManifestAgent){};
}

void manifest_done(Manifest *m) {
        for (size_t i = 0; i < m->n_agents; i++)
                agent_done(&m->agents[i]);
        free(m->agents);
        free(m->path);
        free(m->canonical);
        *m = (Manifest){};
}

/* workspace: "~" expanded, relative to the manifest's directory, an
 * existing directory, canonical. */
static int agent_workspace(const char *path, const char *dir, const char *home, const TomlEntry *e, ManifestAgent *a,
                           char **ret_error) {
        const char *raw = plain_string(e->value);
        if (!raw || !*raw)
                return fail(ret_error, path, &e->value->pos,
                            "agents.%s.workspace must be a non-empty string (a directory; relative to the "
                            "manifest's)",
                            a->name);
        ExpandContext ctx = { .home = home };
        _cleanup_free_ char *exp = NULL, *why = NULL, *joined = NULL;
        int r = expand_string(raw, &ctx, &exp, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(ret_error, path, &e->value->pos, "agents.%s.workspace: %s", a->name, why ?: "?");
        if (!path_is_absolute(exp) && !(joined = path_join(dir, exp)))
                return -ENOMEM;
        char buf[PATH_MAX];
        const char *want = joined ? joined : exp;
        struct stat st;
        const char *bad = !realpath(want, buf)   ? strerror(errno)
                          : stat(buf, &st) < 0   ? strerror(errno)
                          : !S_ISDIR(st.st_mode) ? "not a directory"
                                                 : NULL;
        if (bad)
                return fail(ret_error, path, &e->value->pos,
                            "agents.%s.workspace: %s: %s; name an existing directory, or leave the key out for the "
                            "manifest's directory",
                            a->name, want, bad);
        a->workspace = strdup(buf);
        return a->workspace ? 0 : -ENOMEM;
}

static int agent_load(const char *path, const char *dir, const char *home, const TomlEntry *ae, ManifestAgent *a,
                      char **ret_error) {
        const TomlValue *t = ae->value;
        a->pos = ae->key_pos;
        if (!config_profile_name_valid(ae->key) || strlen(ae->key) != ae->key_len)
                return fail(ret_error, path, &ae->key_pos,
                            "agent name '%.64s' must be 2 to 32 of a-z, 0-9, '_' and '-' (it names the agent's "
                            "branch, lazaret/agent-NAME)",
                            ae->key);
        if (!(a->name = strdup(ae->key)))
                return -ENOMEM;
        if (t->type != TOML_TABLE)
                return fail(ret_error, path, &t->pos, "agents.%s must be a table (profile, command, workspace)",
                            a->name);
        const TomlEntry *command = NULL;
        for (size_t i = 0; i < t->table.n; i++) {
                const TomlEntry *e = &t->table.entries[i];
                if (streq(e->key, "profile")) {
                        const char *s = plain_string(e->value);
                        if (!s || !config_profile_name_valid(s))
                                return fail(ret_error, path, &e->value->pos,
                                            "agents.%s.profile must be a profile's name (a string of 2 to 32 of "
                                            "a-z, 0-9, '_' and '-')",
                                            a->name);
                        if (!(a->profile = strdup(s)))
                                return -ENOMEM;
                } else if (streq(e->key, "command"))
                        command = e;
                else if (streq(e->key, "workspace")) {
                        int r = agent_workspace(path, dir, home, e, a, ret_error);
                        if (r < 0)
                                return r;
                } else
                        return fail(ret_error, path, &e->key_pos,
                                    "unknown key '%.64s' in agents.%s (known: profile, command, workspace)", e->key,
                                    a->name);
        }
        if (!a->profile)
                return fail(ret_error, path, &ae->key_pos, "agents.%s has no profile: name one of your profiles",
                            a->name);
        if (!command)
                return fail(ret_error, path, &ae->key_pos,
                            "agents.%s has no command: give its argv as an array of strings, e.g. "
                            "command = [\"claude\"]",
                            a->name);
        const TomlValue *c = command->value;
        if (c->type != TOML_ARRAY || c->array.n == 0)
                return fail(ret_error, path, &c->pos,
                            "agents.%s.command must be a non-empty array of strings (its argv; no shell language: "
                            "use [\"sh\", \"-c\", \"...\"] for one)",
                            a->name);
        if (c->array.n > MANIFEST_ARGS_MAX)
                return fail(ret_error, path, &c->pos, "agents.%s.command has more than %u arguments", a->name,
                            MANIFEST_ARGS_MAX);
        if (!(a->argv = calloc(c->array.n + 1, sizeof(char *))))
                return -ENOMEM;
        for (size_t i = 0; i < c->array.n; i++) {
                const char *s = plain_string(c->array.items[i]);
                if (!s || (i == 0 && !*s))
                        return fail(ret_error, path, &c->array.items[i]->pos,
                                    "agents.%s.command[%zu] must be a string without NUL bytes%s", a->name, i,
                                    i == 0 ? ", and the program's name not empty" : "");
                if (!(a->argv[i] = strdup(s)))
                        return -ENOMEM;
                a->argc++;
        }
        if (!a->workspace && !(a->workspace = strdup(dir)))
                return -ENOMEM;
        return 0;
}

/* Open path the way a file that is trusted by its bytes must be opened:
 * its last component never a symbolic link, never blocking on a FIFO, a
 * regular file of the user's own. What is hashed, parsed and named is
 * what this one descriptor reads. */
static int read_manifest(const char *path, Manifest *m, char **ret_data, size_t *ret_len, char **ret_error) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                int e = errno;
                if (e == ELOOP)
                        return fail(ret_error, path, NULL,
                                    "is a symbolic link; a manifest must be a regular file of its own (name the file "
                                    "it points to)");
                if (asprintf(ret_error, "cannot read the manifest %s: %s", path, strerror(e)) < 0)
                        *ret_error = NULL;
                return -e;
        }
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return fail(ret_error, path, NULL, "is not a regular file; a manifest must be a regular file");
        if (st.st_uid != geteuid())
                return fail(ret_error, path, NULL,
                            "is owned by uid %u, not by you (uid %u): a manifest must be your own",
                            (unsigned) st.st_uid, (unsigned) geteuid());
        int r = read_fd_capped(fd, MANIFEST_BYTES_MAX, ret_data, ret_len);
        if (r == -EFBIG)
                return fail(ret_error, path, NULL, "larger than %u bytes: not a manifest", MANIFEST_BYTES_MAX);
        if (r < 0) {
                if (asprintf(ret_error, "cannot read the manifest %s: %s", path, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        r = wstrust_sha256_hex(*ret_data, *ret_len, m->sha256);
        if (r < 0)
                return r;
        /* Its canonical path: the one trust records. */
        char proc[64], buf[PATH_MAX];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        ssize_t k = readlink(proc, buf, sizeof(buf) - 1);
        if (k <= 0 || buf[0] != '/')
                return fail(ret_error, path, NULL, "cannot resolve it: %s", k < 0 ? strerror(errno) : "no path");
        buf[k] = '\0';
        m->canonical = strdup(buf);
        return m->canonical ? 0 : -ENOMEM;
}

int manifest_identify(const char *path, char **ret_canonical, char ret_sha256[65], char **ret_error) {
        _cleanup_(manifest_done) Manifest m = {};
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        *ret_error = NULL;
        int r = read_manifest(path, &m, &data, &len, ret_error);
        if (r < 0)
                return r;
        memcpy(ret_sha256, m.sha256, sizeof(m.sha256));
        *ret_canonical = TAKE_PTR(m.canonical);
        return 0;
}

int manifest_canonical(const char *path, char **ret) {
        _cleanup_free_ char *err = NULL;
        char sha[65];
        if (manifest_identify(path, ret, sha, &err) == 0)
                return 0;
        /* Gone or refused: the path it would have. */
        _cleanup_free_ char *dir = strdup(path);
        if (!dir)
                return -ENOMEM;
        char *slash = strrchr(dir, '/'), buf[PATH_MAX];
        const char *base = slash ? slash + 1 : path;
        if (slash)
                *slash = '\0';
        if (!*base || !realpath(slash ? (*dir ? dir : "/") : ".", buf))
                return -errno ?: -EINVAL;
        *ret = path_join(buf, base);
        return *ret ? 0 : -ENOMEM;
}

int manifest_trust_digest(const Manifest *m, char ret[65]) {
        static const char tag[] = "lazaret manifest trust 1";
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        unsigned char md[32];
        unsigned int mdlen = 0;
        bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
                  EVP_DigestUpdate(ctx, tag, sizeof(tag)) == 1 &&
                  EVP_DigestUpdate(ctx, m->sha256, strlen(m->sha256) + 1) == 1;
        for (size_t i = 0; ok && i < m->n_agents; i++)
                ok = EVP_DigestUpdate(ctx, m->agents[i].name, strlen(m->agents[i].name) + 1) == 1 &&
                     EVP_DigestUpdate(ctx, m->agents[i].workspace, strlen(m->agents[i].workspace) + 1) == 1;
        ok = ok && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == sizeof(md);
        EVP_MD_CTX_free(ctx);
        if (!ok)
                return -EIO;
        for (size_t i = 0; i < sizeof(md); i++)
                snprintf(ret + 2 * i, 3, "%02x", md[i]);
        return 0;
}

int manifest_load(const char *path, const char *home, Manifest *ret, char **ret_error) {
        _cleanup_free_ char *data = NULL;
        size_t len = 0;
        *ret_error = NULL;
        _cleanup_(manifest_done) Manifest m = {};
        int r = read_manifest(path, &m, &data, &len, ret_error);
        if (r < 0)
                return r;
        /* Its directory, where workspaces are found. */
        char buf[PATH_MAX];
        snprintf(buf, sizeof(buf), "%s", m.canonical);
        char *slash = strrchr(buf, '/');
        if (slash == buf)
                slash[1] = '\0';
        else if (slash)
                *slash = '\0';

        _cleanup_(toml_freep) TomlValue *root = NULL;
        TomlError te = {};
        r = toml_parse(data, len, NULL, &root, &te);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return fail(ret_error, path, &te.pos, "%s", te.message);
        const TomlEntry *agents = NULL;
        for (size_t i = 0; i < root->table.n; i++) {
                const TomlEntry *e = &root->table.entries[i];
                if (!streq(e->key, "agents"))
                        return fail(ret_error, path, &e->key_pos,
                                    "unknown key '%.64s' at the top level (known: agents)", e->key);
                agents = e;
        }
        if (!agents || agents->value->type != TOML_TABLE || agents->value->table.n == 0)
                return fail(ret_error, path, agents ? &agents->value->pos : &(TomlPos){ 1, 1 },
                            "no agents: give each one a table, [agents.NAME] with profile and command");
        if (agents->value->table.n > MANIFEST_AGENTS_MAX)
                return fail(ret_error, path, &agents->value->pos, "more than %u agents", MANIFEST_AGENTS_MAX);
        if (!(m.agents = calloc(agents->value->table.n, sizeof(ManifestAgent))) || !(m.path = strdup(path)))
                return -ENOMEM;
        for (size_t i = 0; i < agents->value->table.n; i++) {
                r = agent_load(path, buf, home, &agents->value->table.entries[i], &m.agents[m.n_agents++], ret_error);
                if (r < 0)
                        return r;
        }
        *ret = m;
        m = (Manifest){};
        return 0;
}
