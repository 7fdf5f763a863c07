/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-trees.h"
#include "launch.h"
#include "fd-util.h"
#include "fileio.h"
#include "path-util.h"
#include "strbuf.h"
#include "string-util.h"
#include "workspace-trust.h"

#define AGENT_TREES_MAX   (4u << 20)
#define AGENT_TREES_PRUNE (256u << 10)

void agent_trees_free(char **v) {
        if (!v)
                return;
        for (char **p = v; *p; p++)
                free(*p);
        free(v);
}

static bool known(char *const *v, size_t n, const char *path) {
        for (size_t i = 0; i < n; i++)
                if (streq(v[i], path))
                        return true;
        return false;
}

/* dedupe: the specs may repeat a tree; the record never does (its writer
 * holds the lock), and a check per entry would cost its square. */
static int add(char ***v, size_t *n, size_t *cap, const char *path, bool dedupe) {
        if (!path || !path_is_absolute(path) || (dedupe && known(*v, *n, path)))
                return 0;
        if (*n + 2 > *cap) {
                size_t c = *cap ? *cap * 2 : 16;
                char **nv = realloc(*v, c * sizeof(char *));
                if (!nv)
                        return -ENOMEM;
                *v = nv;
                *cap = c;
        }
        if (!((*v)[*n] = strdup(path)))
                return -ENOMEM;
        (*v)[++*n] = NULL;
        return 0;
}

/* What a Domain's last launch gave its agent to write: its workspace and
 * read-write volumes. A file that does not read is passed over: it was
 * written by a coordinator, the sandbox never reaches it. */
static int add_from_spec(const char *path, char ***v, size_t *n, size_t *cap) {
        /* The JSON ends at a NUL when the policy follows it
         * (launch_spec_serialize). */
        json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, NULL);
        if (!j)
                return 0;
        int r = add(v, n, cap, json_string_value(json_object_get(j, "workspace")), true);
        size_t i;
        json_t *vol;
        json_array_foreach(json_object_get(j, "volumes"), i, vol) {
                if (r < 0)
                        break;
                if (!json_is_false(json_object_get(vol, "read_only")))
                        continue;
                r = add(v, n, cap, json_string_value(json_object_get(vol, "host")), true);
        }
        json_decref(j);
        return r;
}

/* What every Domain's last launch gave its agent: a data root from before
 * the record. */
static int from_specs(const char *data_root, char ***v, size_t *n, size_t *cap) {
        _cleanup_free_ char *dir = path_join(data_root, "domains");
        if (!dir)
                return -ENOMEM;
        DIR *d = opendir(dir);
        if (!d)
                return errno == ENOENT ? 0 : negative_errno();
        int r = 0;
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                if (de->d_name[0] == '.')
                        continue;
                StrBuf b = STRBUF_INIT;
                strbuf_printf(&b, "%s/%s/%s", dir, de->d_name, WATCHDOG_SPEC_FILE);
                _cleanup_free_ char *spec = strbuf_steal(&b);
                r = spec ? add_from_spec(spec, v, n, cap) : -ENOMEM;
        }
        closedir(d);
        return r;
}

int agent_trees_load(const char *file, const char *data_root, char ***ret, size_t *ret_n) {
        _cleanup_free_ char *data = NULL;
        size_t size = 0;
        char **v = calloc(1, sizeof(char *));
        size_t n = 0, cap = 1;
        if (!v)
                return -ENOMEM;
        int r = read_file_capped(file, AGENT_TREES_MAX, &data, &size);
        if (r == -ENOENT)
                r = from_specs(data_root, &v, &n, &cap);
        /* A last path with no NUL (not of ours: the file is replaced
         * whole) is left out. */
        for (size_t at = 0; r >= 0 && at < size;) {
                const char *end = memchr(data + at, '\0', size - at);
                if (!end)
                        break;
                r = add(&v, &n, &cap, data + at, false);
                at = (size_t) (end - data) + 1;
        }
        if (r < 0) {
                agent_trees_free(v);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int agent_trees_record(const char *file, const char *data_root, char *const *trees, size_t n_trees) {
        _cleanup_close_ int lfd = -EBADF;
        int r = wstrust_lock(file, &lfd);
        if (r < 0)
                return r;
        _cleanup_(agent_trees_freep) char **v = NULL;
        size_t n = 0;
        r = agent_trees_load(file, data_root, &v, &n);
        if (r < 0)
                return r;
        bool fresh = access(file, F_OK) < 0;
        if (fresh && errno != ENOENT)
                return negative_errno();
        size_t n_new = 0;
        for (size_t i = 0; i < n_trees; i++)
                if (trees[i] && !known(v, n, trees[i]) && !known(trees, i, trees[i]))
                        n_new++;
        if (n_new == 0 && !fresh)
                return 0;
        /* Written whole and renamed into place: a reader sees the old
         * record or the new one. Past a size, trees that are gone (no
         * link is left in them) are dropped. */
        StrBuf out = STRBUF_INIT;
        size_t bytes = 0;
        for (size_t i = 0; i < n; i++)
                bytes += strlen(v[i]) + 1;
        bool prune = bytes > AGENT_TREES_PRUNE;
        for (size_t i = 0; i < n; i++) {
                struct stat st;
                if (prune && lstat(v[i], &st) < 0 && errno == ENOENT)
                        continue;
                strbuf_putn(&out, v[i], strlen(v[i]) + 1);
        }
        for (size_t i = 0; i < n_trees; i++)
                if (trees[i] && !known(v, n, trees[i]) && !known(trees, i, trees[i]))
                        strbuf_putn(&out, trees[i], strlen(trees[i]) + 1);
        size_t len = out.len;
        _cleanup_free_ char *data = strbuf_steal(&out);
        if (!data)
                return -ENOMEM;
        if (len > AGENT_TREES_MAX)
                return -EFBIG;
        return write_file_atomic(file, data, len, 0600, 0);
}

int agent_trees_record_spec(const LaunchSpec *s) {
        if (!s->agent_trees)
                return -EINVAL; /* every launch names it */
        /* domain_dir is {data_root}/domains/{domain_hash}. */
        _cleanup_free_ char *root = strdup(s->domain_dir);
        if (!root)
                return -ENOMEM;
        for (int up = 0; up < 2; up++) {
                char *slash = strrchr(root, '/');
                if (!slash || slash == root)
                        return -EINVAL;
                *slash = '\0';
        }
        _cleanup_free_ char **trees = calloc(s->n_volumes + 1, sizeof(char *));
        if (!trees)
                return -ENOMEM;
        size_t n = 0;
        trees[n++] = s->workspace;
        for (size_t i = 0; i < s->n_volumes; i++)
                if (!s->volumes[i].read_only)
                        trees[n++] = s->volumes[i].host;
        return agent_trees_record(s->agent_trees, root, trees, n);
}
