/* SPDX-License-Identifier: MIT */
/* lazaret diff [PROFILE] [-- GIT-DIFF-ARGS...]
 *
 * Everything shown here was written by the agent: file contents, file
 * names, commit messages. None of it may act on the terminal (an escape
 * sequence that clears the screen or moves the cursor could hide an added
 * .vscode/tasks.json from the person reviewing), so git's output never
 * reaches the terminal as it is: git writes into a memfd, and every byte
 * is shown through shared/prompt-text, as the escalation prompt shows a
 * request. A summary of the changed files, protected host-run files first,
 * comes before the diff, so what matters most is seen even when the diff is
 * long. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "argv-util.h"
#include "exec-util.h"
#include "fd-util.h"
#include "host-git.h"
#include "log.h"
#include "path-pattern.h"
#include "path-util.h"
#include "profile-pick.h"
#include "prompt-text.h"
#include "strbuf.h"
#include "string-util.h"
#include "verbs.h"
#include "workspace-policy.h"

/* What git may write for one call; more is cut, and the reader told so. */
#define DIFF_OUTPUT_MAX   (UINT64_C(64) * 1024 * 1024)
#define DIFF_TIMEOUT_USEC (UINT64_C(120) * 1000000)

/* Every git call: the host's safe options, and file names as UTF-8 (shown
 * escaped below) rather than octal. */
typedef struct GitOut {
        char *data; /* len bytes, any bytes (NUL included), NUL-terminated */
        size_t len;
        bool truncated; /* git wrote more than DIFF_OUTPUT_MAX */
} GitOut;

static void git_out_done(GitOut *o) {
        o->data = mfree(o->data);
        o->len = 0;
}

typedef struct Git {
        const char *program;
        const char *workspace;
} Git;

/* Run git SUB ARGS with its output going to a memfd (--output=/dev/fd/3,
 * so its length is exact even with NUL bytes in it, which a file past
 * git's binary check can hold). RLIMIT_FSIZE caps what git can write: the
 * memfd is the only file these commands write. On git's failure returns
 * -EPROTO with *ret_err (caller frees) saying why. */
static int git_run(const Git *g, const char *sub, const char *const *args, GitOut *ret, char **ret_err) {
        _cleanup_close_ int fd = memfd_create("lazaret-diff", MFD_CLOEXEC);
        if (fd < 0)
                return negative_errno();

        Argv a = {};
        host_git_argv(&a, g->workspace);
        argv_add(&a, "-c");
        argv_add(&a, "core.quotePath=false");
        argv_add(&a, sub);
        argv_add(&a, "--output=/dev/fd/3");
        for (const char *const *p = args; *p; p++)
                argv_add(&a, *p);
        if (a.oom) {
                argv_done(&a);
                return -ENOMEM;
        }

        struct rlimit old, lim;
        if (getrlimit(RLIMIT_FSIZE, &old) < 0) {
                argv_done(&a);
                return negative_errno();
        }
        lim = old;
        if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur > DIFF_OUTPUT_MAX + 1)
                lim.rlim_cur = DIFF_OUTPUT_MAX + 1;
        if (lim.rlim_max != RLIM_INFINITY && lim.rlim_cur > lim.rlim_max)
                lim.rlim_cur = lim.rlim_max;
        if (setrlimit(RLIMIT_FSIZE, &lim) < 0) {
                argv_done(&a);
                return negative_errno();
        }
        _cleanup_(exec_result_done) ExecResult res = {};
        int r = exec_capture_fds(g->program, (const char *const *) a.v, &fd, 1, DIFF_TIMEOUT_USEC, &res);
        (void) setrlimit(RLIMIT_FSIZE, &old);
        argv_done(&a);
        if (r < 0)
                return r;

        struct stat st;
        if (fstat(fd, &st) < 0)
                return negative_errno();
        bool cut = (uint64_t) st.st_size > DIFF_OUTPUT_MAX || res.status == 128 + SIGXFSZ;
        /* Status 1 without a word on stderr: differences found, when
         * GIT-DIFF-ARGS asked for --exit-code. */
        bool ok = res.spawn_error == 0 && !res.timed_out &&
                  (res.status == 0 || cut || (res.status == 1 && (!res.err || !*res.err)));
        if (!ok) {
                StrBuf b = STRBUF_INIT;
                if (res.spawn_error < 0)
                        strbuf_printf(&b, "cannot run %s: %s", g->program, strerror(-res.spawn_error));
                else if (res.timed_out)
                        strbuf_printf(&b, "git %s did not finish in %u s", sub,
                                      (unsigned) (DIFF_TIMEOUT_USEC / 1000000));
                else {
                        /* One line of git's: its fatal or error line (not
                         * the usage), escaped, since it may quote a name. */
                        const char *e = res.err ? res.err : "", *line = e;
                        for (const char *l = e; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
                                if (startswith(l, "fatal: ") || startswith(l, "error: ")) {
                                        line = l;
                                        break;
                                }
                        _cleanup_free_ char *why = prompt_visible(line, strcspn(line, "\n"));
                        strbuf_printf(&b, "git %s failed (exit status %d): %s", sub, res.status,
                                      why && *why ? why : "no message");
                }
                char *msg = strbuf_steal(&b);
                if (!msg)
                        return -ENOMEM;
                *ret_err = msg;
                return -EPROTO;
        }

        size_t len = (size_t) ((uint64_t) st.st_size > DIFF_OUTPUT_MAX ? DIFF_OUTPUT_MAX : (uint64_t) st.st_size);
        _cleanup_free_ char *data = malloc(len + 1);
        if (!data)
                return -ENOMEM;
        for (size_t got = 0; got < len;) {
                ssize_t n = pread(fd, data + got, len - got, (off_t) got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return negative_errno();
                if (n == 0) {
                        len = got;
                        break;
                }
                got += (size_t) n;
        }
        data[len] = '\0';
        *ret = (GitOut){ .data = TAKE_PTR(data), .len = len, .truncated = cut };
        return 0;
}

/* Show s as inert text: control characters, escape sequences, bytes that
 * are not UTF-8 and invisible or direction-changing characters as escapes
 * (prompt-text's rules, so a backslash shows as \\). With lines, a newline
 * ends the line and a tab stays a tab. */
static void put_visible(const char *s, size_t len, bool lines) {
        for (size_t i = 0; i < len;) {
                if (lines && (s[i] == '\n' || s[i] == '\t')) {
                        putchar(s[i++]);
                        continue;
                }
                PromptUnit u;
                i += prompt_unit(s + i, len - i, &u);
                fputs(u.text, stdout);
        }
}

typedef enum ChangeKind {
        CHANGE_ADDED,
        CHANGE_CHANGED,
        CHANGE_REMOVED,
        CHANGE_TYPE,
        CHANGE_OTHER,
        _CHANGE_KIND_MAX,
        _CHANGE_KIND_INVALID = -EINVAL,
} ChangeKind;

static const char *const change_kind_name[_CHANGE_KIND_MAX] = {
        [CHANGE_ADDED] = "added",     [CHANGE_CHANGED] = "changed",
        [CHANGE_REMOVED] = "removed", [CHANGE_TYPE] = "type changed", /* a file became a symlink, or the reverse */
        [CHANGE_OTHER] = "other",
};

static ChangeKind change_kind_from_status(const char *s) {
        switch (s[0]) {
        case 'A':
                return CHANGE_ADDED;
        case 'M':
                return CHANGE_CHANGED;
        case 'D':
                return CHANGE_REMOVED;
        case 'T':
                return CHANGE_TYPE;
        default:
                return CHANGE_OTHER;
        }
}

typedef enum PathClass {
        PATH_PROTECTED, /* a host-run file: shown first, marked */
        PATH_DOT, /* some component starts with '.' */
        PATH_PLAIN,
        _PATH_CLASS_MAX,
        _PATH_CLASS_INVALID = -EINVAL,
} PathClass;

/* The next NUL-terminated field of a -z listing, or NULL at its end. */
static const char *next_field(const GitOut *o, size_t *pos) {
        if (*pos >= o->len)
                return NULL;
        const char *f = o->data + *pos;
        *pos += strnlen(f, o->len - *pos) + 1;
        return f;
}

/* Directories of the branch's tree known by what they hold (issue 40,
 * workspace-policy.h): a git directory whatever its name, a venv. Git
 * tracks no empty directory, so objects/ and refs/ are there when a file
 * beneath them is. */
typedef struct MarkedDir {
        char *dir; /* "" for the top of the tree */
        unsigned markers;
} MarkedDir;

typedef struct MarkedDirs {
        MarkedDir *v;
        size_t n, cap;
} MarkedDirs;

static void marked_dirs_done(MarkedDirs *m) {
        for (size_t i = 0; i < m->n; i++)
                free(m->v[i].dir);
        free(m->v);
        *m = (MarkedDirs){};
}

static int marked_dirs_add(MarkedDirs *m, const char *dir, size_t len, unsigned bit) {
        for (size_t i = 0; i < m->n; i++)
                if (strlen(m->v[i].dir) == len && memcmp(m->v[i].dir, dir, len) == 0) {
                        m->v[i].markers |= bit;
                        return 0;
                }
        if (m->n == m->cap) {
                size_t cap = m->cap ? m->cap * 2 : 16;
                MarkedDir *nv = reallocarray(m->v, cap, sizeof(MarkedDir));
                if (!nv)
                        return -ENOMEM;
                m->v = nv;
                m->cap = cap;
        }
        char *d = strndup(dir, len);
        if (!d)
                return -ENOMEM;
        m->v[m->n++] = (MarkedDir){ .dir = d, .markers = bit };
        return 0;
}

/* From a -z list of the tree's files: each directory holding a marker
 * name (HEAD, commondir and pyvenv.cfg as files or symlinks, objects and
 * refs as anything). */
static int marked_dirs_from(MarkedDirs *m, const GitOut *o) {
        size_t pos = 0;
        for (const char *f; (f = next_field(o, &pos)) && *f;)
                for (const char *c = f;;) {
                        const char *end = strchr(c, '/');
                        size_t n = end ? (size_t) (end - c) : strlen(c);
                        char name[16];
                        unsigned bit = 0;
                        if (n < sizeof name) {
                                memcpy(name, c, n);
                                name[n] = '\0';
                                bit = workspace_marker_of(name);
                        }
                        if (bit & (WS_MARKER_HEAD | WS_MARKER_COMMONDIR | WS_MARKER_PYVENV) && end)
                                bit = 0; /* a directory of that name is not git's, nor a venv's */
                        if (bit && marked_dirs_add(m, f, c == f ? 0 : (size_t) (c - f) - 1, bit) < 0)
                                return -ENOMEM;
                        if (!end)
                                break;
                        c = end + 1;
                }
        return 0;
}

/* The git directory or venv rel lies in, or NULL. */
static const MarkedDir *marked_above(const MarkedDirs *m, const char *rel) {
        for (size_t i = 0; m && i < m->n; i++) {
                size_t len = strlen(m->v[i].dir);
                if (workspace_markers_kind(m->v[i].markers) != WS_MARKED_NONE &&
                    (len == 0 || (strncmp(rel, m->v[i].dir, len) == 0 && rel[len] == '/')))
                        return &m->v[i];
        }
        return NULL;
}

/* The extra protected patterns ([workspace] protect) add to the built-in
 * ones; a file in a git directory or a venv is protected too. */
static PathClass path_class(const char *rel, const char *const *extra, size_t n_extra, const MarkedDirs *marked) {
        if (marked_above(marked, rel))
                return PATH_PROTECTED;
        if (path_pattern_match_any(rel, path_pattern_protect_default,
                                   path_pattern_count(path_pattern_protect_default)) ||
            path_pattern_match_any(rel, extra, n_extra))
                return PATH_PROTECTED;
        for (const char *c = rel; c; c = strchr(c, '/')) {
                if (*c == '/')
                        c++;
                if (*c == '.')
                        return PATH_DOT;
        }
        return PATH_PLAIN;
}

typedef struct Change {
        const char *path; /* into the name-status output */
        const char *status; /* git's letter(s) */
        ChangeKind kind;
        PathClass class;
        bool binary; /* git shows "Binary files differ" for it */
} Change;

static int change_cmp_path(const void *a, const void *b) {
        return strcmp(((const Change *) a)->path, ((const Change *) b)->path);
}

static int change_cmp_shown(const void *a, const void *b) {
        const Change *x = a, *y = b;
        if (x->class != y->class)
                return x->class < y->class ? -1 : 1;
        return strcmp(x->path, y->path);
}

typedef struct DiffRequest {
        Git git;
        const char *branch; /* lazaret/agent-NAME */
        /* Both resolved once: the agent can move its branch while this
         * runs, and the summary, commits and diff must show one commit. */
        const char *head; /* the commit id of HEAD */
        const char *tip; /* the commit id the branch is at */
        const char *const *protect; /* extra protected patterns */
        size_t n_protect;
        const char *const *opts; /* GIT-DIFF-ARGS: options, then paths */
        size_t n_opts;
        const char *const *paths;
        size_t n_paths;
} DiffRequest;

/* The show_* functions return 0 or the verb's exit status. */
static int oom(void) {
        log_error("out of memory");
        return EXIT_LAZARET;
}

static int show_failure(int r, const char *err) {
        if (r == -EPROTO)
                log_error("%s", err);
        else
                log_error("cannot run git: %s", strerror(-r));
        return EXIT_LAZARET;
}

/* What git says, all of it gathered before anything is shown, so a failure
 * (a bad GIT-DIFF-ARGS word) prints one error and no half review. */
typedef struct DiffOutput {
        GitOut markers; /* the branch's files named as git's and venvs' markers, -z */
        GitOut names; /* --name-status -z */
        GitOut stats; /* --numstat -z */
        GitOut commits; /* log -z, one subject line each */
        GitOut diff;
} DiffOutput;

static void diff_output_done(DiffOutput *d) {
        git_out_done(&d->markers);
        git_out_done(&d->names);
        git_out_done(&d->stats);
        git_out_done(&d->commits);
        git_out_done(&d->diff);
}

static int diff_gather(const DiffRequest *q, DiffOutput *d) {
        const char *const common[] = { "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", "-z" };
        const char *ns[ELEMENTSOF(common) + 5], *num[ELEMENTSOF(common) + 5];
        size_t n = 0;
        for (size_t i = 0; i < ELEMENTSOF(common); i++)
                ns[n] = num[n] = common[i], n++;
        ns[n] = "--name-status";
        num[n++] = "--numstat";
        ns[n] = num[n] = q->head, n++;
        ns[n] = num[n] = q->tip, n++;
        ns[n] = num[n] = "--", n++;
        ns[n] = num[n] = NULL;

        _cleanup_free_ char *err = NULL, *range = NULL;
        /* Every file of the branch's tree that names a marker: against the
         * empty tree (of the repository's hash), so all of them, changed
         * or not. */
        const char *empty = strlen(q->tip) == 64 ? "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
                                                 : "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
        const char *mk[] = { "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", "-z", "--name-only", empty,
                             q->tip, "--", ":(glob)**/HEAD", ":(glob)**/commondir", ":(glob)**/pyvenv.cfg",
                             /* a file or symlink of the name, and a directory's files */
                             ":(glob)**/objects", ":(glob)**/objects/**", ":(glob)**/refs", ":(glob)**/refs/**", NULL };
        int r = git_run(&q->git, "diff", mk, &d->markers, &err);
        if (r >= 0)
                r = git_run(&q->git, "diff", ns, &d->names, &err);
        if (r >= 0)
                r = git_run(&q->git, "diff", num, &d->stats, &err);
        if (r < 0)
                return show_failure(r, err);

        if (asprintf(&range, "%s..%s", q->head, q->tip) < 0)
                return oom();
        const char *log[] = { "--no-color", "--no-show-signature", "-z", "--format=%h %s", range, "--", NULL };
        r = git_run(&q->git, "log", log, &d->commits, &err);
        if (r < 0)
                return show_failure(r, err);

        Argv a = {};
        argv_add(&a, "--no-renames"); /* GIT-DIFF-ARGS may ask for -M */
        for (size_t i = 0; i < q->n_opts; i++)
                argv_add(&a, q->opts[i]);
        /* After GIT-DIFF-ARGS, so that they cannot be turned back on. */
        argv_add(&a, "--no-ext-diff");
        argv_add(&a, "--no-textconv");
        argv_add(&a, "--no-color");
        argv_add(&a, q->head);
        argv_add(&a, q->tip);
        argv_add(&a, "--");
        for (size_t i = 0; i < q->n_paths; i++)
                argv_add(&a, q->paths[i]);
        if (a.oom) {
                argv_done(&a);
                return oom();
        }
        r = git_run(&q->git, "diff", (const char *const *) a.v, &d->diff, &err);
        argv_done(&a);
        if (r < 0)
                return show_failure(r, err);
        return 0;
}

static int show_summary(const DiffRequest *q, const GitOut *names, const GitOut *stats, const GitOut *markers) {
        size_t n_changes = 0, cap = 0, pos = 0;
        _cleanup_free_ Change *v = NULL;
        _cleanup_(marked_dirs_done) MarkedDirs marked_dirs = {};
        const MarkedDirs *marked = &marked_dirs;
        if (marked_dirs_from(&marked_dirs, markers) < 0)
                return oom();
        for (;;) {
                const char *status = next_field(names, &pos), *path = next_field(names, &pos);
                if (!status || !path || !*status || !*path)
                        break;
                if (n_changes == cap) {
                        cap = cap ? cap * 2 : 64;
                        Change *nv = reallocarray(v, cap, sizeof(Change));
                        if (!nv)
                                return oom();
                        v = nv;
                }
                v[n_changes++] = (Change){ .path = path,
                                           .status = status,
                                           .kind = change_kind_from_status(status),
                                           .class = path_class(path, q->protect, q->n_protect, marked) };
        }
        if (n_changes > 0)
                qsort(v, n_changes, sizeof(Change), change_cmp_path);
        /* --numstat -z: "ADDED\tREMOVED\tPATH", "-\t-\tPATH" for a binary file. */
        pos = 0;
        for (const char *f; (f = next_field(stats, &pos)) && *f;) {
                if (!startswith(f, "-\t-\t"))
                        continue;
                Change key = { .path = f + 4 };
                Change *c = n_changes ? bsearch(&key, v, n_changes, sizeof(Change), change_cmp_path) : NULL;
                if (c)
                        c->binary = true;
        }
        if (n_changes > 0)
                qsort(v, n_changes, sizeof(Change), change_cmp_shown);

        size_t per_kind[_CHANGE_KIND_MAX] = {}, protected = 0;
        bool any_binary = false;
        for (size_t i = 0; i < n_changes; i++) {
                per_kind[v[i].kind]++;
                protected += v[i].class == PATH_PROTECTED;
                any_binary = any_binary || v[i].binary;
        }

        printf("Files changed on %s against HEAD: ", q->branch);
        if (n_changes == 0)
                printf("none\n");
        else {
                printf("%zu (", n_changes);
                const char *sep = "";
                for (ChangeKind k = 0; k < _CHANGE_KIND_MAX; k++)
                        if (per_kind[k] > 0) {
                                printf("%s%zu %s", sep, per_kind[k], change_kind_name[k]);
                                sep = ", ";
                        }
                printf(")\n");
        }
        if (protected > 0)
                printf("! %zu protected %s: host programs run or obey %s, read %s first\n", protected,
                       protected == 1 ? "file" : "files", protected == 1 ? "it" : "them",
                       protected == 1 ? "it" : "them");
        /* Each git directory or venv the branch changes, named: merged,
         * the host's git takes the one as a repository (its config names
         * commands), and the person runs the other's programs. */
        for (size_t k = 0; k < marked->n; k++) {
                const MarkedDir *md = &marked->v[k];
                WsMarked kind = workspace_markers_kind(md->markers);
                bool touched = false;
                for (size_t i = 0; kind != WS_MARKED_NONE && !touched && i < n_changes; i++)
                        touched = marked_above(marked, v[i].path) == md;
                if (!touched)
                        continue;
                printf("! ");
                put_visible(*md->dir ? md->dir : ".", *md->dir ? strlen(md->dir) : 1, false);
                printf(kind == WS_MARKED_GIT ? "/ is a git directory: merged, git on the host takes it as a repository "
                                               "and runs the commands its config names\n"
                                             : "/ is a Python virtual environment: merged, its programs run when you "
                                               "use it\n");
        }
        if (n_changes > 0)
                printf("\n");
        for (size_t i = 0; i < n_changes; i++) {
                const Change *c = &v[i];
                const char *mark = c->class == PATH_PROTECTED ? "! protected" : c->class == PATH_DOT ? ". dotfile" : "";
                printf("  %-11s  %-12s  ", mark, change_kind_name[c->kind]);
                put_visible(c->path, strlen(c->path), false);
                if (c->kind == CHANGE_OTHER) {
                        printf("  (git status ");
                        put_visible(c->status, strlen(c->status), false);
                        printf(")");
                }
                if (c->binary)
                        printf("  (binary: not shown below)");
                printf("\n");
        }
        if (names->truncated || stats->truncated)
                printf("! The list is cut at %u MiB: more files changed than it shows.\n",
                       (unsigned) (DIFF_OUTPUT_MAX >> 20));
        if (n_changes > 0)
                printf("\nRenames show as a removal and an addition (the whole content of a moved file is below).\n");
        if (any_binary)
                printf("Binary files are not shown; 'lazaret diff PROFILE -- --text' shows them, escaped.\n");
        printf("\nShown: %s at %s (HEAD at %s).\n"
               "The agent can still move its branch: merge what is shown here with\n"
               "'git merge %s', not by the branch's name.\n",
               q->branch, q->tip, q->head, q->tip);
        return 0;
}

static int show_commits(const DiffRequest *q, const GitOut *o) {
        size_t n = 0, pos = 0;
        for (const char *f; (f = next_field(o, &pos)) && *f;)
                n++;
        printf("\nCommits on %s that HEAD does not have: %zu\n", q->branch, n);
        pos = 0;
        for (const char *f; (f = next_field(o, &pos)) && *f;) {
                printf("  ");
                put_visible(f, strnlen(f, o->len - (size_t) (f - o->data)), false);
                printf("\n");
        }
        if (o->truncated)
                printf("! The list is cut at %u MiB: there are more commits.\n", (unsigned) (DIFF_OUTPUT_MAX >> 20));
        return 0;
}

static int show_diff(const GitOut *o) {
        printf("\nThe diff. What the agent wrote is shown inertly: \\xNN is a control byte or one that is not UTF-8,\n"
               "<U+XXXX> an invisible or direction-changing character, \\\\ a backslash.\n\n");
        /* Line by line: git's own marker may keep its backslash (a line of
         * the agent's file always starts with ' ', '+' or '-'). */
        static const char no_newline[] = "\\ No newline at end of file\n";
        for (size_t i = 0; i < o->len;) {
                const char *nl = memchr(o->data + i, '\n', o->len - i);
                size_t n = nl ? (size_t) (nl - (o->data + i)) + 1 : o->len - i;
                if (n == sizeof no_newline - 1 && memcmp(o->data + i, no_newline, n) == 0)
                        fputs(no_newline, stdout);
                else
                        put_visible(o->data + i, n, true);
                i += n;
        }
        if (o->len > 0 && o->data[o->len - 1] != '\n')
                printf("\n");
        if (o->truncated)
                printf("! The diff is cut at %u MiB: 'lazaret diff PROFILE -- PATH...' shows less at a time.\n",
                       (unsigned) (DIFF_OUTPUT_MAX >> 20));
        return 0;
}

/* The commit id name resolves to (caller frees): 0, -ENOENT when there is
 * none, or -errno. */
static int resolve_commit(const char *git, const char *workspace, const char *name, char **ret) {
        _cleanup_free_ char *spec = NULL;
        if (asprintf(&spec, "%s^{commit}", name) < 0)
                return -ENOMEM;
        Argv a = {};
        host_git_argv(&a, workspace);
        argv_add(&a, "rev-parse");
        argv_add(&a, "--verify");
        argv_add(&a, "--quiet");
        argv_add(&a, "--end-of-options");
        argv_add(&a, spec);
        if (a.oom) {
                argv_done(&a);
                return -ENOMEM;
        }
        _cleanup_(exec_result_done) ExecResult res = {};
        int r = exec_capture(git, (const char *const *) a.v, UINT64_C(30) * 1000000, &res);
        argv_done(&a);
        if (r < 0)
                return r;
        if (res.spawn_error < 0)
                return res.spawn_error;
        if (exec_result_failed(&res) || !res.out)
                return -ENOENT;
        size_t n = strspn(res.out, "0123456789abcdef");
        if ((n != 40 && n != 64) || (res.out[n] != '\n' && res.out[n] != '\0'))
                return -ENOENT;
        char *id = strndup(res.out, n);
        if (!id)
                return -ENOMEM;
        *ret = id;
        return 0;
}

/* GIT-DIFF-ARGS that would send the diff elsewhere, compare something else
 * than the two commits, run a program the configuration names, or colour
 * it (only escapes would show). */
static const char *refused_option(const char *arg) {
        static const char *const refused[] = { "--output", "--no-index", "--ext-diff", "--textconv", "--color" };
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                const char *rest = startswith(arg, refused[i]);
                if (rest && (!*rest || *rest == '=' || streq(refused[i], "--color")))
                        return refused[i];
        }
        return NULL;
}

int verb_diff(int argc, char **argv, const Globals *g) {
        const char *name = NULL;
        int extra = argc;
        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--")) {
                        extra = i + 1;
                        break;
                }
                if (streq(argv[i], "-h") || streq(argv[i], "--help")) {
                        printf("Usage: lazaret diff [PROFILE] [-- GIT-DIFF-ARGS...]\n\n"
                               "Show the agent's branch (lazaret/agent-PROFILE) against the host's HEAD: first\n"
                               "the changed files, protected host-run files (lazaret.toml, .vscode/, .envrc,\n"
                               ".git, ..., and files in a directory git would take as a repository or in a\n"
                               "venv) first and marked '! protected', then other dotfiles, then the rest;\n"
                               "then the branch's commits; then the diff. Everything the agent wrote (contents,\n"
                               "file names, commit messages) is shown inertly: control characters and escape\n"
                               "sequences as \\xNN, invisible and bidi characters as <U+XXXX>, a backslash as\n"
                               "\\\\. Renames show as a removal and an addition.\n\n"
                               "Runs the host's git without pager, hooks, fsmonitor, external diff or textconv\n"
                               "drivers and without GIT_* variables. GIT-DIFF-ARGS shape the diff only (the\n"
                               "summary and commits always show everything): words starting with '-' are git\n"
                               "diff options, in one word (-U5, --stat=100); other words, and all after a\n"
                               "second '--', are paths. --output, --no-index, --ext-diff, --textconv and\n"
                               "--color are refused.\n");
                        return 0;
                }
                if (name) {
                        log_error("unexpected argument '%s': git diff options go after '--'", argv[i]);
                        return EXIT_USAGE;
                }
                name = argv[i];
        }

        /* GIT-DIFF-ARGS: options (before any second "--"), then paths. */
        _cleanup_free_ const char **opts = calloc((size_t) argc + 1, sizeof(char *));
        _cleanup_free_ const char **paths = calloc((size_t) argc + 1, sizeof(char *));
        if (!opts || !paths)
                return oom();
        size_t n_opts = 0, n_paths = 0;
        bool only_paths = false;
        for (int i = extra; i < argc; i++) {
                const char *arg = argv[i];
                if (!only_paths && streq(arg, "--")) {
                        only_paths = true;
                        continue;
                }
                if (only_paths || arg[0] != '-') {
                        paths[n_paths++] = arg;
                        continue;
                }
                const char *bad = refused_option(arg);
                if (bad) {
                        log_error("'%s' is refused in GIT-DIFF-ARGS: lazaret diff shows the diff itself, escaped, "
                                  "and runs no diff driver; leave %s out",
                                  arg, bad);
                        return EXIT_USAGE;
                }
                opts[n_opts++] = arg;
        }

        _cleanup_(config_freep) Config *cfg = NULL;
        const ConfigProfile *p = NULL;
        int r;
        if (profile_load(g, name, &cfg, &p) < 0)
                return EXIT_LAZARET;

        /* In a subdirectory of a repository, the agent's branch is the
         * root's (branch mode works from the repository's root). */
        const char *repo = p->repo_root ?: cfg->workspace;
        _cleanup_free_ char *gd = path_join(repo, ".git");
        struct stat st;
        if (!gd || lstat(gd, &st) < 0 || !S_ISDIR(st.st_mode)) {
                log_error("%s is not the top of a git repository: there is no agent branch to show", repo);
                return EXIT_LAZARET;
        }
        _cleanup_free_ char *git = NULL;
        const char *search = getenv("PATH");
        if (exec_find_program(search && *search ? search : "/usr/bin:/bin", "git", &git) < 0) {
                log_error("git is not installed: sudo apt-get install git");
                return EXIT_LAZARET;
        }
        if (host_git_drop_environment() < 0)
                return oom();
        _cleanup_free_ char *ref = NULL, *branch = NULL;
        if (asprintf(&branch, "lazaret/agent-%s", cfg->agent ? cfg->agent : p->name) < 0 ||
            asprintf(&ref, "refs/heads/%s", branch) < 0)
                return oom();

        /* The branch must exist: a clear word rather than git's. */
        _cleanup_free_ char *tip = NULL, *head = NULL;
        r = resolve_commit(git, repo, ref, &tip);
        if (r == -ENOENT) {
                log_error("the agent has no branch %s yet: run 'lazaret run %s' first", branch, p->name);
                return EXIT_LAZARET;
        }
        if (r >= 0)
                r = resolve_commit(git, repo, "HEAD", &head);
        if (r == -ENOENT) {
                log_error("%s has no commit at HEAD: there is nothing to compare the agent's branch with", repo);
                return EXIT_LAZARET;
        }
        if (r < 0) {
                log_error("cannot run git: %s", strerror(-r));
                return EXIT_LAZARET;
        }

        const DiffRequest q = {
                .git = { .program = git, .workspace = repo },
                .branch = branch,
                .head = head,
                .tip = tip,
                .protect = (const char *const *) cfg->protect, /* [workspace] protect */
                .n_protect = cfg->n_protect,
                .opts = opts,
                .n_opts = n_opts,
                .paths = paths,
                .n_paths = n_paths,
        };
        _cleanup_(diff_output_done) DiffOutput d = {};
        r = diff_gather(&q, &d);
        if (r == 0)
                r = show_summary(&q, &d.names, &d.stats, &d.markers);
        if (r == 0)
                r = show_commits(&q, &d.commits);
        if (r == 0)
                r = show_diff(&d.diff);
        if (fflush(stdout) != 0 && r == 0) {
                log_error("cannot write the diff: %s", strerror(errno));
                return EXIT_LAZARET;
        }
        return r;
}
