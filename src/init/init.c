/* SPDX-License-Identifier: MIT */
/* lazaret-init: PID 1 of every Lazaret sandbox. Bind-mounted read-only at
 * /run/lazaret/init, so the sandbox needs nothing from the image to stay up.
 * It reaps orphans (sessions run through runsc exec are children of the
 * sandbox's init) and exits on SIGTERM, SIGINT or SIGHUP. Statically linked:
 * images may have no libc at all.
 *
 *   lazaret-init [--relay PATH]
 *
 * With --relay it also runs PATH (lazaret-relay, no arguments) and starts
 * it again whenever it exits, at most once a second; on SIGTERM, SIGINT or
 * SIGHUP it sends the relay SIGTERM before exiting. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

int main(int argc, char **argv) {
        const char *relay = NULL;
        pid_t relay_pid = 0;
        long long last_start = 0, restart_at = -1;
        sigset_t set;

        if (argc == 3 && strcmp(argv[1], "--relay") == 0 && argv[2][0] != '\0')
                relay = argv[2];
        else if (argc != 1) {
                fputs("lazaret-init: usage: lazaret-init [--relay PATH]\n", stderr);
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
