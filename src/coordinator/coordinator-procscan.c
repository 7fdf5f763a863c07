/* SPDX-License-Identifier: MIT */
/* The processes started inside the native sandbox (issue 21), which has no
 * trace points: a scan of its process trees in /proc, as the vetto seed's
 * Linux observation does. Each scan walks down from the sandbox's init and
 * from each session's joiner (the parents of everything inside: a joined
 * command's parent is its joiner, an orphan's the init) through every
 * thread's children file; a process not seen before, or one whose name
 * changed (an execve), becomes a "process"/"started" record like gVisor's,
 * with "observed_by": "scan". Attribution: the session whose joiner it is
 * found below, or, found below the init, the session it was first seen in.
 *
 * Observation only: nothing is enforced on what it sees, and a process
 * shorter than the interval (50 ms while processes come and go, 500 ms and
 * then 2 s when quiet) is missed; status says so. The sandbox's processes
 * write what is read here (names, command lines): every read is bounded,
 * and what is recorded is escaped by the event record like the rest. */
#include <dirent.h>

#include "coordinator-internal.h"
#include "proc-util.h"
#include "trace-wire.h"

#define SCAN_FAST_USEC  (UINT64_C(50) * 1000)
#define SCAN_MID_USEC   (UINT64_C(500) * 1000)
#define SCAN_SLOW_USEC  (UINT64_C(2) * 1000000)
#define SCAN_QUIET_MID  (UINT64_C(1) * 1000000) /* quiet this long: the middle interval */
#define SCAN_QUIET_SLOW (UINT64_C(10) * 1000000) /* and this long: the slow one */
#define SCAN_PROCS      4096u /* processes one scan follows, at most */
#define SCAN_PATH_MAX   512u
#define SCAN_ARG_MAX    256u
#define SCAN_CMDLINE    (64u * 1024u)

struct ScanProc {
        pid_t pid; /* as the host sees it */
        pid_t parent; /* host pid of the process it was found below (0: a root) */
        uint64_t start_time;
        uint32_t sid; /* index + 1 in Trace.sids; 0: none */
        bool forked; /* a fork that has not run execve yet (PF_FORKNOEXEC) */
        bool again; /* not recorded yet: its command line read empty (in execve, or ending) */
        char comm[16];
};

#define PF_FORKNOEXEC 0x00000040u /* the kernel's task flag, field 9 of /proc/PID/stat */

static int by_pid(const void *a, const void *b) {
        pid_t x = ((const ScanProc *) a)->pid, y = ((const ScanProc *) b)->pid;
        return (x > y) - (x < y);
}

static const ScanProc *known(const ProcScan *sc, pid_t pid) {
        ScanProc key = { .pid = pid };
        return bsearch(&key, sc->procs, sc->n_procs, sizeof(ScanProc), by_pid);
}

/* comm, session id, flags and start time from /proc/PID/stat (comm may
 * hold anything, even ") "; the fields after it follow the last ')'). */
static int read_stat(pid_t pid, char comm[static 16], pid_t *ret_session, unsigned *ret_flags, uint64_t *ret_start) {
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return -EIO;
        buf[n] = '\0';
        char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
        if (!open_paren || !close_paren || close_paren < open_paren)
                return -EBADMSG;
        size_t l = MIN((size_t) (close_paren - open_paren - 1), (size_t) 15);
        memcpy(comm, open_paren + 1, l);
        comm[l] = '\0';
        /* Fields 6 (session), 9 (flags) and 22 (starttime); close_paren
         * + 2 is field 3 (state). */
        const char *p = close_paren + 2;
        for (int field = 3; field < 22 && p; field++) {
                if (field == 6)
                        *ret_session = (pid_t) strtol(p, NULL, 10);
                else if (field == 9)
                        *ret_flags = (unsigned) strtoul(p, NULL, 10);
                p = strchr(p, ' ');
                if (p)
                        p++;
        }
        if (!p)
                return -EBADMSG;
        *ret_start = strtoull(p, NULL, 10);
        return 0;
}

/* The last NSpid (the pid inside the sandbox), Uid and Gid of
 * /proc/PID/status; -1 where missing. */
static void read_status(pid_t pid, long *ret_inner, long *ret_uid, long *ret_gid) {
        char path[64];
        _cleanup_free_ char *text = NULL;
        *ret_inner = *ret_uid = *ret_gid = -1;
        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        if (read_file_capped(path, 16384, &text, NULL) < 0)
                return;
        for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                if (startswith(line, "NSpid:")) {
                        char *end = line + 6;
                        for (;;) {
                                char *q;
                                long v = strtol(end, &q, 10);
                                if (q == end)
                                        break;
                                *ret_inner = v;
                                end = q;
                        }
                } else if (startswith(line, "Uid:"))
                        *ret_uid = strtol(line + 4, NULL, 10);
                else if (startswith(line, "Gid:"))
                        *ret_gid = strtol(line + 4, NULL, 10);
        }
}

static json_t *read_link(pid_t pid, const char *what, const ProcScan *sc, bool *cut) {
        char path[64], buf[SCAN_PATH_MAX + 1];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, what);
        ssize_t n = readlink(path, buf, sizeof(buf));
        if (n < 0)
                return json_null();
        if ((size_t) n > SCAN_PATH_MAX) {
                n = SCAN_PATH_MAX;
                *cut = true;
        }
        buf[n] = '\0';
        /* The workspace, where the sandbox sees it. */
        const char *rest = sc->workspace ? path_under(buf, sc->workspace) : NULL;
        if (rest) {
                StrBuf b = STRBUF_INIT;
                strbuf_printf(&b, "/workspace%s%s", *rest ? "/" : "", rest);
                _cleanup_free_ char *w = strbuf_steal(&b);
                return w ? event_string(w, strlen(w)) : json_null();
        }
        return event_string(buf, (size_t) n);
}

static int exe_of(pid_t pid, struct stat *ret) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/exe", (int) pid);
        return stat(path, ret) < 0 ? -errno : 0;
}

static int cmdline_of(pid_t pid, char **ret, size_t *ret_len) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int) pid);
        return read_file_capped(path, SCAN_CMDLINE, ret, ret_len);
}

/* Not an execve of the sandbox's: lazaret-native's own processes (a
 * joiner's child before its execve, the init), a process ending (its
 * program gone), or a fork that has not exec'd (the program and command
 * line of its parent). */
static bool not_an_exec(const ProcScan *sc, const ScanProc *p, const char *cmd, size_t len, const struct stat *before) {
        struct stat st, pst;
        if (exe_of(p->pid, &st) < 0 || (st.st_dev == sc->native_dev && st.st_ino == sc->native_ino))
                return true;
        /* It ran execve between the two looks: what was read may be half
         * the old program's (a fork's command line, the new one's path).
         * Not now: the next scan finds its new name and records it whole. */
        if (st.st_dev != before->st_dev || st.st_ino != before->st_ino)
                return true;
        if (p->parent <= 0 || exe_of(p->parent, &pst) < 0 || st.st_dev != pst.st_dev || st.st_ino != pst.st_ino)
                return false;
        _cleanup_free_ char *pcmd = NULL;
        size_t plen = 0;
        return cmdline_of(p->parent, &pcmd, &plen) >= 0 && plen == len && memcmp(pcmd, cmd, len) == 0;
}

static void record(Coordinator *co, ScanProc *p) {
        ProcScan *sc = &co->scan;
        Trace *t = &co->trace;
        _cleanup_free_ char *cmd = NULL;
        size_t len = 0;
        struct stat before;
        /* A fork caught before its execve (its parent may be gone, so
         * not_an_exec() cannot tell): the next scan records the program. */
        if (p->forked)
                return;
        if (exe_of(p->pid, &before) < 0 || cmdline_of(p->pid, &cmd, &len) < 0)
                return;
        /* No command line at all: its memory is between two programs or
         * already gone. The next scan records it, if it is still there. */
        if (len == 0) {
                p->again = true;
                return;
        }
        if (not_an_exec(sc, p, cmd, len, &before))
                return;
        sc->execs++;
        if (!p->sid)
                sc->unattributed++;
        if (!trace_take_token(t)) {
                sc->over_rate++;
                sc->unreported++;
                return;
        }
        long pid, uid, gid, ppid = 0, pu, pg;
        read_status(p->pid, &pid, &uid, &gid);
        if (pid < 0)
                return; /* gone meanwhile */
        /* A joined command's parent is its joiner, outside: 0. */
        if (p->parent > 0)
                read_status(p->parent, &ppid, &pu, &pg);
        bool cut = false;
        json_t *argv = json_array();
        size_t argc = 0;
        for (size_t off = 0; off < len; argc++) {
                size_t l = strnlen(cmd + off, len - off);
                if (argv && argc < TRACE_ARGV_MAX) {
                        if (l > SCAN_ARG_MAX)
                                cut = true;
                        json_array_append_new(argv, event_string(cmd + off, MIN(l, (size_t) SCAN_ARG_MAX)));
                }
                off += l + 1;
        }
        json_t *d = json_pack("{s:I, s:I, s:o, s:o*, s:I, s:o, s:I, s:I, s:s}", "pid", (json_int_t) pid, "ppid",
                              (json_int_t) MAX(ppid, 0L), "path", read_link(p->pid, "exe", sc, &cut), "argv", argv,
                              "argc", (json_int_t) argc, "cwd", read_link(p->pid, "cwd", sc, &cut), "uid",
                              (json_int_t) uid, "gid", (json_int_t) gid, "observed_by", "scan");
        if (d && (cut || argc > TRACE_ARGV_MAX))
                json_object_set_new(d, "cut", json_true());
        if (d && co->egress_probing)
                json_object_set_new(d, "probe", json_true());
        if (d && sc->unreported) {
                json_object_set_new(d, "not_recorded", json_integer((json_int_t) sc->unreported));
                sc->unreported = 0;
        }
        if (event_emit(co->events, "process", "started", p->sid ? t->sids[p->sid - 1] : NULL, d))
                sc->recorded++;
}

/* Queue every child of pid (of each of its threads). */
static void push_children(ScanProc *q, size_t *n, pid_t pid, uint32_t sid, bool *full) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", (int) pid);
        DIR *d = opendir(path);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                _cleanup_free_ pid_t *kids = NULL;
                size_t n_kids = 0;
                if (proc_children(pid, (pid_t) atoi(de->d_name), &kids, &n_kids) < 0)
                        continue;
                for (size_t i = 0; i < n_kids; i++) {
                        if (*n >= SCAN_PROCS) {
                                *full = true;
                                break;
                        }
                        q[(*n)++] = (ScanProc){ .pid = kids[i], .parent = pid, .sid = sid };
                }
        }
        closedir(d);
}

static void scan_once(Coordinator *co) {
        ProcScan *sc = &co->scan;
        ScanProc *q = calloc(SCAN_PROCS, sizeof(ScanProc));
        if (!q)
                return;
        size_t n = 0;
        bool full = false, changed = false;
        /* The roots: each session's joiner, the init (orphans). */
        for (Session *s = co->sessions; s; s = s->next)
                if (s->pid > 0 && session_state_running(s->state))
                        push_children(q, &n, s->pid, trace_session_sid(co, s), &full);
        push_children(q, &n, sc->init_pid, 0, &full);
        /* Roots' children have no parent inside: their ppid is 0 (or the
         * init's 1, set below). */
        for (size_t i = 0; i < n; i++)
                q[i].parent = q[i].parent == sc->init_pid ? q[i].parent : 0;
        for (size_t i = 0; i < n; i++) {
                ScanProc *p = &q[i];
                pid_t session = 0;
                unsigned flags = 0;
                if (read_stat(p->pid, p->comm, &session, &flags, &p->start_time) < 0) {
                        p->pid = 0;
                        continue;
                }
                p->forked = (flags & PF_FORKNOEXEC) != 0;
                const ScanProc *old = known(sc, p->pid);
                bool same = old && old->start_time == p->start_time;
                if (same && old->sid)
                        p->sid = old->sid; /* where it was first seen */
                /* An orphan the init took: still in the terminal session
                 * its joiner leads (unless it left it with setsid). */
                for (Session *s = co->sessions; !p->sid && s; s = s->next)
                        if (s->pid > 0 && s->pid == session)
                                p->sid = trace_session_sid(co, s);
                /* New, or a new program (its name, or the first execve
                 * of a fork, whatever its name). */
                if (!same || strcmp(old->comm, p->comm) != 0 || (old->forked && !p->forked) || old->again) {
                        record(co, p);
                        changed = true;
                }
                push_children(q, &n, p->pid, p->sid, &full);
        }
        /* What this scan saw is what the next compares with. */
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
                if (q[i].pid > 0)
                        q[k++] = q[i];
        qsort(q, k, sizeof(ScanProc), by_pid);
        free(sc->procs);
        sc->procs = q;
        sc->n_procs = k;
        if (full)
                sc->over_limit++;
        uint64_t now = now_usec();
        if (changed)
                sc->last_change = now;
        uint64_t quiet = now - sc->last_change;
        sc->next = now + (quiet < SCAN_QUIET_MID    ? SCAN_FAST_USEC
                          : quiet < SCAN_QUIET_SLOW ? SCAN_MID_USEC
                                                    : SCAN_SLOW_USEC);
}

void scan_begin(Coordinator *co, const char *workspace) {
        ProcScan *sc = &co->scan;
        struct stat st;
        if (stat(co->spec.native, &st) < 0) {
                snprintf(co->trace.why, sizeof(co->trace.why), "cannot examine %s: %s", co->spec.native,
                         strerror(errno));
                return;
        }
        sc->native_dev = st.st_dev;
        sc->native_ino = st.st_ino;
        sc->init_pid = sandbox_native_init_pid(&co->sb);
        sc->workspace = workspace ? strdup(workspace) : NULL;
        sc->on = true;
        sc->last_change = now_usec();
        sc->next = now_usec();
}

void scan_session_started(Coordinator *co) {
        if (!co->scan.on)
                return;
        /* Its command runs in a moment: look then, and often for a while. */
        co->scan.last_change = now_usec();
        co->scan.next = MIN(co->scan.next, now_usec() + SCAN_FAST_USEC / 5);
}

void scan_run(Coordinator *co) {
        if (co->scan.on && !co->stopping && now_usec() >= co->scan.next)
                scan_once(co);
}

void scan_end(Coordinator *co) {
        ProcScan *sc = &co->scan;
        sc->on = false;
        sc->procs = mfree(sc->procs);
        sc->n_procs = 0;
        sc->workspace = mfree(sc->workspace);
}

json_t *scan_status(const Coordinator *co) {
        const ProcScan *sc = &co->scan;
        return json_pack("{s:b, s:s, s:I, s:I, s:I, s:I, s:I}", "observed", 1, "via",
                         "a scan of the native sandbox's processes in /proc, every 50 ms while they change and up "
                         "to every 2 s when quiet: a process that lives shorter may be missed",
                         "execs", (json_int_t) sc->execs, "recorded", (json_int_t) sc->recorded, "over_rate",
                         (json_int_t) sc->over_rate, "unattributed", (json_int_t) sc->unattributed, "over_limit",
                         (json_int_t) sc->over_limit);
}

void co_scan_begin_hook(void *host, const char *workspace) {
        Coordinator *co = host;
        if (co->events)
                scan_begin(co, workspace);
        else
                snprintf(co->trace.why, sizeof(co->trace.why), "there is no event record to keep them");
}

void co_scan_session_hook(void *host) {
        scan_session_started(host);
}
