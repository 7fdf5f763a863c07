/* SPDX-License-Identifier: MIT */
/* What a session changed in the workspace, seen from the host (issue 19):
 * the agent's worktree in branch mode, the working tree in direct mode
 * with a repository. When a session starts, the commit it starts on is
 * read; when it ends, the files that differ from that commit (the agent's
 * commits included; `git diff --numstat`) and the untracked ones (`git
 * ls-files -o --exclude-standard`) go on the event record as one
 * "files"/"changed" record, at most FILES_MAX names. Both run on the slow
 * thread with the host's git and its safe command line (git/host-git),
 * never on the loop; sessions that overlap each see the other's changes.
 * Without a repository nothing is recorded. */
#include "coordinator-internal.h"

#define FILES_MAX      500
#define FILES_GIT_USEC (UINT64_C(30) * 1000000)

struct SessionFiles {
        EventLog *events;
        char *root; /* the host directory git looks at */
        /* Branch mode: the worktree's own git directory in the repository
         * (.git/worktrees/NAME), never what the worktree's .git file names:
         * the agent writes that file, and a git directory of its making
         * would hand the host's git its configuration (a clean filter is a
         * command git runs to compare a file; so is a nested repository's
         * status). NULL in direct mode, where the router keeps .git and
         * refuses any directory git would take for a repository. */
        char *git_dir;
        char session_id[37];
        char *start; /* the commit the session started on, or NULL */
};

static SessionFiles *files_free(SessionFiles *f) {
        if (f) {
                free(f->root);
                free(f->git_dir);
                free(f->start);
                free(f);
        }
        return NULL;
}

static int files_git(const SessionFiles *f, const char *const *args, ExecResult *ret) {
        _cleanup_free_ char *git = NULL;
        int r = exec_find_program("/usr/bin:/bin:/usr/local/bin", "git", &git);
        if (r < 0)
                return r;
        Argv a = {};
        host_git_argv(&a, f->root);
        if (f->git_dir) {
                argv_addf(&a, "--git-dir=%s", f->git_dir);
                argv_add(&a, "--work-tree=.");
        }
        /* Nor a nested repository's, which git asks when it compares one. */
        argv_add(&a, "-c");
        argv_add(&a, "diff.ignoreSubmodules=all");
        for (const char *const *p = args; *p; p++)
                argv_add(&a, *p);
        if (a.oom) {
                argv_done(&a);
                return -ENOMEM;
        }
        r = exec_capture(git, (const char *const *) a.v, FILES_GIT_USEC, ret);
        argv_done(&a);
        if (r >= 0 && exec_result_failed(ret))
                r = -EIO;
        return r;
}

static int job_files_start(Store *st, void *userdata) {
        (void) st;
        SessionFiles *f = userdata;
        _cleanup_(exec_result_done) ExecResult res = {};
        if (files_git(f, (const char *const[]){ "rev-parse", "--verify", "--quiet", "HEAD", NULL }, &res) >= 0)
                f->start = strndup(res.out, strcspn(res.out, "\n"));
        return 0;
}

static void job_files_start_done(int result, void *userdata) {
        (void) result;
        (void) userdata; /* the session's until it ends */
}

/* "A\tD\tPATH\0" records of diff --numstat -z (binary: "-\t-\tPATH"),
 * up to the empty one the captured output's own NUL ends them with (its
 * strlen() is the first record's alone: issue 42, one file reported). */
static void add_numstat(json_t *files, const char *out, size_t *n, bool *cut) {
        for (const char *rec = out; *rec;) {
                size_t l = strlen(rec);
                const char *next = rec + l + 1;
                const char *t1 = memchr(rec, '\t', l),
                           *t2 = t1 ? memchr(t1 + 1, '\t', l - (size_t) (t1 + 1 - rec)) : NULL;
                if (!t2) {
                        rec = next;
                        continue;
                }
                if (*n >= FILES_MAX) {
                        *cut = true;
                        break;
                }
                const char *path = t2 + 1;
                json_t *e = json_pack("{s:o}", "path", event_string(path, l - (size_t) (path - rec)));
                if (e && rec[0] != '-') {
                        json_object_set_new(e, "added", json_integer(strtoll(rec, NULL, 10)));
                        json_object_set_new(e, "deleted", json_integer(strtoll(t1 + 1, NULL, 10)));
                } else if (e)
                        json_object_set_new(e, "binary", json_true());
                json_array_append_new(files, e);
                (*n)++;
                rec = next;
        }
}

/* "S\0PATH\0" records of diff --name-status -z --diff-filter=AD: each
 * file of files the session made (A) or removed (D) says so, so a file
 * made and committed reads as added, not modified. */
static void mark_status(json_t *files, const char *out) {
        for (const char *st = out; *st;) {
                const char *path = st + strlen(st) + 1;
                if (!*path)
                        break;
                size_t i;
                json_t *e;
                json_array_foreach(files, i, e) {
                        const char *p = json_string_value(json_object_get(e, "path"));
                        if (p && streq(p, path))
                                json_object_set_new(e, "status", json_string(st[0] == 'A' ? "added" : "deleted"));
                }
                st = path + strlen(path) + 1;
        }
}

static int job_files_end(Store *st, void *userdata) {
        (void) st;
        SessionFiles *f = userdata;
        json_t *files = json_array();
        size_t n = 0;
        bool cut = false;
        const char *why = NULL;
        if (!files)
                return -ENOMEM;
        if (f->start) {
                _cleanup_(exec_result_done) ExecResult res = {};
                /* The worktree against the commit the session started on:
                 * tracked files, the agent's commits included. */
                if (files_git(f,
                              (const char *const[]){ "diff", "--numstat", "-z", "--no-renames", "--no-ext-diff",
                                                     "--no-textconv", "--ignore-submodules=all", f->start, "--", NULL },
                              &res) >= 0) {
                        add_numstat(files, res.out, &n, &cut);
                        _cleanup_(exec_result_done) ExecResult ns = {};
                        if (n > 0 && files_git(f,
                                               (const char *const[]){ "diff", "--name-status", "-z", "--no-renames",
                                                                      "--diff-filter=AD", "--no-ext-diff",
                                                                      "--ignore-submodules=all", f->start, "--", NULL },
                                               &ns) >= 0)
                                mark_status(files, ns.out);
                } else
                        why = "git diff failed";
        } else
                why = "the session's start commit is unknown (no commit yet, or git failed)";
        _cleanup_(exec_result_done) ExecResult res = {};
        if (files_git(f, (const char *const[]){ "ls-files", "-z", "--others", "--exclude-standard", NULL }, &res) >= 0)
                for (const char *p = res.out; *p; p += strlen(p) + 1) {
                        if (n >= FILES_MAX) {
                                cut = true;
                                break;
                        }
                        json_array_append_new(
                                files, json_pack("{s:o, s:b}", "path", event_string(p, strlen(p)), "untracked", 1));
                        n++;
                }
        json_t *d = json_pack("{s:s, s:s?, s:o, s:b}", "root", f->root, "since", f->start, "files", files, "truncated",
                              cut);
        if (d && why)
                json_object_set_new(d, "incomplete", json_string(why));
        event_emit(f->events, "files", "changed", f->session_id, d);
        return 0;
}

static void job_files_end_done(int result, void *userdata) {
        (void) result;
        files_free(userdata);
}

void co_files_session_started(Coordinator *co, Session *s) {
        const char *root = co->worktree                           ? co->worktree
                           : !co->spec.branch && co->spec.git_dir ? co->spec.workspace
                                                                  : NULL;
        if (!root || !co->events || !co->slow)
                return;
        SessionFiles *f = calloc(1, sizeof(SessionFiles));
        if (!f || !(f->root = strdup(root))) {
                files_free(f);
                return;
        }
        if (co->worktree) {
                const char *name = strrchr(co->worktree, '/');
                if (!co->spec.git_dir || !name ||
                    asprintf(&f->git_dir, "%s/worktrees/%s", co->spec.git_dir, name + 1) < 0) {
                        f->git_dir = NULL;
                        files_free(f);
                        return;
                }
        }
        f->events = co->events;
        memcpy(f->session_id, s->id, 37);
        if (store_worker_submit(co->slow, job_files_start, job_files_start_done, f) < 0) {
                files_free(f);
                return;
        }
        s->files = f;
}

void co_files_session_ended(Coordinator *co, Session *s) {
        SessionFiles *f = TAKE_PTR(s->files);
        if (!f)
                return;
        /* Once the loop has ended (teardown), the slow thread is gone:
         * the record of this session's files goes with it. */
        if (!co->slow || store_worker_submit(co->slow, job_files_end, job_files_end_done, f) < 0)
                files_free(f);
}
