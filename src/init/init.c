/* SPDX-License-Identifier: MIT */
/* lazaret-init: PID 1 of every Lazaret sandbox. Bind-mounted read-only at
 * /run/lazaret/init, so the sandbox needs nothing from the image to stay up.
 * It reaps orphans (sessions run through runsc exec are children of the
 * sandbox's init) and exits on SIGTERM, SIGINT or SIGHUP. Statically linked:
 * images may have no libc at all.
 *
 *   lazaret-init [--relay PATH]
 *   lazaret-init --reap FD -- PROGRAM [ARG]...
 *   lazaret-init --dispense FD SERVICES
 *   lazaret-init --fsmonitor VERSION TOKEN
 *
 * With --relay it also runs PATH (lazaret-relay, no arguments) and starts
 * it again whenever it exits, at most once a second; on SIGTERM, SIGINT or
 * SIGHUP it sends the relay SIGTERM before exiting.
 *
 * With --reap (on the host, for an auto-approved escalation, issue 41) it
 * is no PID 1: it becomes a child subreaper, runs PROGRAM in its own
 * process group and, once PROGRAM has ended, ends with SIGKILL whatever
 * PROGRAM left running (a setsid'd or double-forked child is reparented
 * to it, not to the host's init), then exits with PROGRAM's status (128 +
 * the signal that ended it). FD is our own /proc/PID/task/PID/children,
 * opened before a Landlock ruleset without /proc was applied. SIGTERM,
 * SIGINT and SIGHUP are passed to PROGRAM.
 *
 * With --dispense (run by the coordinator through runsc exec, issue 41) it
 * is the sandbox's end of the door to the host's sockets: dispense-main.c,
 * shared/dispense.h.
 *
 * With --fsmonitor it is git's core.fsmonitor hook inside the sandbox
 * (issue 44): fsmonitor-hook.c. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "init.h"

#define RELAY_RESTART_MS 1000

static long long now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static pid_t start_relay(const char *path, const sigset_t *set) {
        pid_t pid = fork();
        if (pid < 0) {
                fprintf(stderr, "lazaret-init: fork: %s\n", strerror(errno));
                return 0;
        }
        if (pid == 0) {
                char *argv[] = { (char *) path, NULL };
                sigprocmask(SIG_UNBLOCK, set, NULL);
                execv(path, argv);
                fprintf(stderr, "lazaret-init: cannot run %s: %s\n", path, strerror(errno));
                _exit(127);
        }
        return pid;
}

extern char **environ;

static int wait_status(int st) {
        return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : 1;
}

/* Kill every child until none is left: those that die leave their own
 * children to us, the subreaper, for the next round. */
static void reap_all(int children_fd) {
        char buf[8192];
        for (int round = 0;; round++) {
                ssize_t n = pread(children_fd, buf, sizeof buf - 1, 0);
                if (n > 0) {
                        buf[n] = '\0';
                        for (char *p = buf, *end; *p; p = end) {
                                long pid = strtol(p, &end, 10);
                                if (end == p)
                                        break;
                                if (pid > 0)
                                        kill((pid_t) pid, SIGKILL);
                        }
                }
                int st;
                pid_t w = waitpid(-1, &st, n > 0 ? 0 : WNOHANG);
                if (w < 0 && errno == ECHILD)
                        return;
                if (w == 0 && n <= 0 && round > 1000)
                        return; /* none listed and none to reap: nothing left */
        }
}

static int reap_main(int children_fd, char **argv) {
        sigset_t set;
        if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
                fprintf(stderr, "lazaret-init: cannot become a subreaper: %s\n", strerror(errno));
                return 125;
        }
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
                return 125;
        pid_t main_pid = fork();
        if (main_pid < 0) {
                fprintf(stderr, "lazaret-init: fork: %s\n", strerror(errno));
                return 125;
        }
        if (main_pid == 0) {
                sigprocmask(SIG_UNBLOCK, &set, NULL);
                close(children_fd);
                execve(argv[0], argv, environ);
                fprintf(stderr, "lazaret-init: cannot run %s: %s\n", argv[0], strerror(errno));
                _exit(errno == ENOENT ? 127 : 126);
        }
        int status = 1;
        for (bool done = false; !done;) {
                int sig;
                if (sigwait(&set, &sig) != 0)
                        continue;
                if (sig != SIGCHLD) {
                        kill(main_pid, sig);
                        continue;
                }
                int st;
                pid_t pid;
                while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
                        if (pid == main_pid) {
                                status = wait_status(st);
                                done = true;
                        }
        }
        reap_all(children_fd);
        return status;
}

int main(int argc, char **argv) {
        const char *relay = NULL;
        pid_t relay_pid = 0;
        long long last_start = 0, restart_at = -1;
        sigset_t set;

        if (argc >= 5 && strcmp(argv[1], "--reap") == 0 && strcmp(argv[3], "--") == 0 && argv[4][0] == '/') {
                char *end;
                long fd = strtol(argv[2], &end, 10);
                if (*end || fd < 3) {
                        fputs("lazaret-init: --reap takes the descriptor of our children file\n", stderr);
                        return 125;
                }
                return reap_main((int) fd, argv + 4);
        }
        if (argc == 4 && strcmp(argv[1], "--dispense") == 0) {
                char *end;
                long fd = strtol(argv[2], &end, 10);
                if (*end || fd < 3) {
                        fputs("lazaret-init: --dispense takes the descriptor of the coordinator's socket\n", stderr);
                        return 2;
                }
                return dispense_main((int) fd, argv[3]);
        }
        if (argc == 4 && strcmp(argv[1], "--fsmonitor") == 0)
                return fsmonitor_hook_main(argv[2], argv[3]);
        if (argc == 3 && strcmp(argv[1], "--relay") == 0 && argv[2][0] != '\0')
                relay = argv[2];
        else if (argc != 1) {
                fputs("lazaret-init: usage: lazaret-init [--relay PATH] | --reap FD -- /PROGRAM [ARG]... | --dispense "
                      "FD SERVICES | --fsmonitor VERSION TOKEN\n",
                      stderr);
                return 2;
        }
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGHUP);
        sigaddset(&set, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &set, NULL) < 0) {
                fprintf(stderr, "lazaret-init: sigprocmask: %s\n", strerror(errno));
                return 1;
        }
        if (relay)
                restart_at = 0;
        for (;;) {
                int sig = 0;
                if (restart_at >= 0 && now_ms() >= restart_at) {
                        last_start = now_ms();
                        relay_pid = start_relay(relay, &set);
                        restart_at = relay_pid > 0 ? -1 : last_start + RELAY_RESTART_MS;
                }
                if (restart_at >= 0) {
                        long long wait = restart_at - now_ms();
                        struct timespec ts = { .tv_sec = wait > 0 ? wait / 1000 : 0,
                                               .tv_nsec = wait > 0 ? (wait % 1000) * 1000000 : 0 };
                        sig = sigtimedwait(&set, NULL, &ts);
                        if (sig < 0)
                                continue;
                } else if (sigwait(&set, &sig) != 0)
                        continue;
                if (sig == SIGCHLD) {
                        int status;
                        pid_t pid;
                        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                                if (relay_pid > 0 && pid == relay_pid) {
                                        relay_pid = 0;
                                        restart_at = last_start + RELAY_RESTART_MS;
                                }
                        continue;
                }
                if (relay_pid > 0)
                        kill(relay_pid, SIGTERM);
                return 0;
        }
}
