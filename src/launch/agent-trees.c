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

#define AGENT_TREES_MAX (4u << 20)
/* Ends an entry a crash cut short (no canonical path ends so). */
#define TORN '\x01'

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

static int add(char ***v, size_t *n, size_t *cap, const char *path) {
        if (!path || !path_is_absolute(path) || known(*v, *n, path))
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
        json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
        if (!j)
                return 0;
        int r = add(v, n, cap, json_string_value(json_object_get(j, "workspace")));
        size_t i;
        json_t *vol;
        json_array_foreach(json_object_get(j, "volumes"), i, vol) {
                if (r < 0)
                        break;
                if (!json_is_false(json_object_get(vol, "read_only")))
                        continue;
                r = add(v, n, cap, json_string_value(json_object_get(vol, "host")));
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

int agent_trees_load(const char *data_root, char ***ret, size_t *ret_n) {
        _cleanup_free_ char *file = path_join(data_root, AGENT_TREES_FILE);
        if (!file)
                return -ENOMEM;
        _cleanup_free_ char *data = NULL;
        size_t size = 0;
        char **v = calloc(1, sizeof(char *));
        size_t n = 0, cap = 1;
        if (!v)
                return -ENOMEM;
        int r = read_file_capped(file, AGENT_TREES_MAX, &data, &size);
        if (r == -ENOENT)
                r = from_specs(data_root, &v, &n, &cap);
        if (r < 0) {
                agent_trees_free(v);
                return r;
        }
        /* A last path cut short (a write torn by a crash) is left out. */
        for (size_t at = 0; at < size;) {
                const char *end = memchr(data + at, '\0', size - at);
                if (!end)
                        break;
                size_t len = (size_t) (end - (data + at));
                /* A torn entry, closed off by a later append. */
                r = len && data[at + len - 1] == TORN ? 0 : add(&v, &n, &cap, data + at);
                if (r < 0) {
                        agent_trees_free(v);
                        return r;
                }
                at = (size_t) (end - data) + 1;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int agent_trees_record(const char *data_root, char *const *trees, size_t n_trees) {
        _cleanup_free_ char *file = path_join(data_root, AGENT_TREES_FILE);
        if (!file)
                return -ENOMEM;
        _cleanup_(agent_trees_freep) char **v = NULL;
        size_t n = 0;
        int r = agent_trees_load(data_root, &v, &n);
        if (r < 0)
                return r;
        /* The first record: what the Domains' specs gave (unless another
         * coordinator wrote it meanwhile), then this one's. */
        if (access(file, F_OK) < 0) {
                if (errno != ENOENT)
                        return negative_errno();
                StrBuf out = STRBUF_INIT;
                for (size_t i = 0; i < n; i++)
                        strbuf_putn(&out, v[i], strlen(v[i]) + 1);
                size_t len = out.len;
                _cleanup_free_ char *data = strbuf_steal(&out);
                if (!data)
                        return -ENOMEM;
                r = write_file_atomic(file, data, len, 0600, 1);
                if (r < 0 && r != -EEXIST)
                        return r;
        }
        _cleanup_close_ int fd = -EBADF;
        for (size_t i = 0; i < n_trees; i++) {
                if (!trees[i] || known(v, n, trees[i]) || known(trees, i, trees[i]))
                        continue;
                if (fd < 0) {
                        fd = open(file, O_RDWR | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
                        if (fd < 0)
                                return negative_errno();
                        /* A last entry torn by a crash is closed off and
                         * marked, so that it does not run into this one. */
                        struct stat st;
                        char last = 0;
                        if (fstat(fd, &st) < 0)
                                return negative_errno();
                        if (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) != 1)
                                return -EIO;
                        if (last && write(fd, (const char[]){ TORN, 0 }, 2) != 2)
                                return -EIO;
                }
                /* One write each: appends of other coordinators do not
                 * interleave with it. */
                size_t len = strlen(trees[i]) + 1;
                ssize_t k = write(fd, trees[i], len);
                if (k < 0)
                        return negative_errno();
                if ((size_t) k != len)
                        return -EIO;
        }
        if (fd >= 0 && fsync(fd) < 0)
                return negative_errno();
        return 0;
}

int agent_trees_record_spec(const LaunchSpec *s) {
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
        return agent_trees_record(root, trees, n);
}
