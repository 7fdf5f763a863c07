/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>

#include "thread-util.h"

int thread_create_no_signals(pthread_t *ret, void *(*fn)(void *), void *arg) {
        sigset_t all, old;
        sigfillset(&all);
        int r = pthread_sigmask(SIG_SETMASK, &all, &old);
        if (r != 0)
                return -r;
        r = pthread_create(ret, NULL, fn, arg);
        (void) pthread_sigmask(SIG_SETMASK, &old, NULL);
        return -r;
}
