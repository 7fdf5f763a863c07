/* SPDX-License-Identifier: MIT */
/* StoreWorker (store.h): one thread runs store jobs in submission order, so
 * the event loop never waits on an fsync. Completions go to a done queue and
 * an eventfd tells the loop to call store_worker_dispatch(). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fd-util.h"
#include "store.h"
#include "thread-util.h"

typedef struct StoreJob {
        StoreJobFn fn;
        StoreDoneFn done;
        void *userdata;
        int result;
        struct StoreJob *next;
} StoreJob;

struct StoreWorker {
        Store *store;
        int event_fd;
        pthread_mutex_t mutex;
        pthread_cond_t wake; /* to the thread: a job was queued, or stop */
        pthread_cond_t idle; /* from the thread: the pending queue ran dry */
        StoreJob *pending_head, *pending_tail;
        StoreJob *done_head, *done_tail;
        bool busy;
        bool stop;
        bool thread_started;
        bool dispatching;
        pthread_t thread;
};

static void queue_push(StoreJob **head, StoreJob **tail, StoreJob *j) {
        j->next = NULL;
        if (*tail)
                (*tail)->next = j;
        else
                *head = j;
        *tail = j;
}

static StoreJob *queue_pop(StoreJob **head, StoreJob **tail) {
        StoreJob *j = *head;
        if (!j)
                return NULL;
        *head = j->next;
        if (!*head)
                *tail = NULL;
        j->next = NULL;
        return j;
}

static void *worker_main(void *p) {
        StoreWorker *w = p;

        pthread_mutex_lock(&w->mutex);
        for (;;) {
                while (!w->pending_head && !w->stop)
                        pthread_cond_wait(&w->wake, &w->mutex);
                StoreJob *j = queue_pop(&w->pending_head, &w->pending_tail);
                if (!j)
                        break; /* stop requested and nothing left */
                w->busy = true;
                pthread_mutex_unlock(&w->mutex);

                j->result = j->fn(w->store, j->userdata);

                pthread_mutex_lock(&w->mutex);
                w->busy = false;
                queue_push(&w->done_head, &w->done_tail, j);
                /* Cannot fail short of counter overflow (2^64 - 1 writes). */
                uint64_t one = 1;
                (void) !write(w->event_fd, &one, sizeof(one));
                if (!w->pending_head)
                        pthread_cond_broadcast(&w->idle);
        }
        pthread_mutex_unlock(&w->mutex);
        return NULL;
}

int store_worker_new(Store *s, StoreWorker **ret) {
        if (!s || !ret)
                return -EINVAL;

        StoreWorker *w = calloc(1, sizeof(StoreWorker));
        if (!w)
                return -ENOMEM;
        w->store = s;
        w->event_fd = -EBADF;
        pthread_mutex_init(&w->mutex, NULL);
        pthread_cond_init(&w->wake, NULL);
        pthread_cond_init(&w->idle, NULL);
        _cleanup_(store_worker_freep) StoreWorker *owner = w;

        w->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->event_fd < 0)
                return negative_errno();

        int r = thread_create_no_signals(&w->thread, worker_main, w);
        if (r < 0)
                return r;
        w->thread_started = true;

        *ret = TAKE_PTR(owner);
        return 0;
}

int store_worker_fd(StoreWorker *w) {
        if (!w)
                return -EINVAL;
        return w->event_fd;
}

int store_worker_submit(StoreWorker *w, StoreJobFn fn, StoreDoneFn done, void *userdata) {
        if (!w || !fn)
                return -EINVAL;
        StoreJob *j = calloc(1, sizeof(StoreJob));
        if (!j)
                return -ENOMEM;
        *j = (StoreJob){ .fn = fn, .done = done, .userdata = userdata };

        pthread_mutex_lock(&w->mutex);
        if (w->stop || !w->thread_started) {
                pthread_mutex_unlock(&w->mutex);
                free(j);
                return -ESHUTDOWN;
        }
        queue_push(&w->pending_head, &w->pending_tail, j);
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->mutex);
        return 0;
}

int store_worker_dispatch(StoreWorker *w) {
        if (!w)
                return -EINVAL;
        /* A callback that dispatches again would run later completions
         * before the earlier ones still in our list. */
        if (w->dispatching)
                return 0;

        /* Reset the eventfd before taking the queue: a completion that
         * lands after the take makes it readable again. */
        uint64_t n;
        (void) !read(w->event_fd, &n, sizeof(n));

        pthread_mutex_lock(&w->mutex);
        StoreJob *list = w->done_head;
        w->done_head = w->done_tail = NULL;
        pthread_mutex_unlock(&w->mutex);

        int ran = 0;
        w->dispatching = true;
        while (list) {
                StoreJob *j = list;
                list = j->next;
                if (j->done)
                        j->done(j->result, j->userdata);
                free(j);
                ran++;
        }
        w->dispatching = false;
        return ran;
}

StoreWorker *store_worker_free(StoreWorker *w) {
        if (!w)
                return NULL;

        if (w->thread_started) {
                /* Drain: callbacks may submit follow-up jobs, which run too. */
                for (;;) {
                        pthread_mutex_lock(&w->mutex);
                        while (w->pending_head || w->busy)
                                pthread_cond_wait(&w->idle, &w->mutex);
                        pthread_mutex_unlock(&w->mutex);

                        if (store_worker_dispatch(w) > 0)
                                continue;

                        pthread_mutex_lock(&w->mutex);
                        bool drained = !w->pending_head && !w->done_head;
                        if (drained) {
                                w->stop = true;
                                pthread_cond_signal(&w->wake);
                        }
                        pthread_mutex_unlock(&w->mutex);
                        if (drained)
                                break;
                }
                pthread_join(w->thread, NULL);
        }

        /* Only a worker whose thread never started can hold jobs here. */
        for (StoreJob *j; (j = queue_pop(&w->pending_head, &w->pending_tail));)
                free(j);
        for (StoreJob *j; (j = queue_pop(&w->done_head, &w->done_tail));)
                free(j);
        safe_close(w->event_fd);
        pthread_cond_destroy(&w->idle);
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->mutex);
        free(w);
        return NULL;
}
