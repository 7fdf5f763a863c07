/* SPDX-License-Identifier: MIT */
/* lazaret-init: PID 1 of every Lazaret sandbox. Bind-mounted read-only at
 * /run/lazaret/init, so the sandbox needs nothing from the image to stay up.
 * It reaps orphans (sessions run through runsc exec are children of the
 * sandbox's init) and exits on SIGTERM, SIGINT or SIGHUP. Statically linked:
 * images may have no libc at all. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
        sigset_t set;
        (void) argv;

        if (argc != 1) {
                fputs("lazaret-init: takes no arguments\n", stderr);
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
        for (;;) {
                int sig = 0;
                if (sigwait(&set, &sig) != 0)
                        continue;
                if (sig == SIGCHLD) {
                        while (waitpid(-1, NULL, WNOHANG) > 0)
                                ;
                        continue;
                }
                return 0;
        }
}
