/* SPDX-License-Identifier: MIT */
#pragma once

#include <pthread.h>

/* pthread_create() with every signal blocked in the new thread: signals
 * belong to the caller's loop (signalfd), and a thread that left one
 * unblocked would take it (a SIGCHLD lost there leaves a child unreaped,
 * a session never ended). Returns 0 or -errno. */
int thread_create_no_signals(pthread_t *ret, void *(*fn)(void *), void *arg);
