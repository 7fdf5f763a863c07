/* SPDX-License-Identifier: MIT */
#pragma once

/* Small language helpers shared by every layer. libc only. */

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _unused_       __attribute__((unused))
#define _noreturn_     __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
/* Code that runs on a stack the sanitizer does not know (a CLONE_VM
 * child's, before its exec): not instrumented, or ASan warns at each
 * noreturn call made there. */
#define _no_sanitize_address_ __attribute__((no_sanitize("address")))
#define _warn_unused_result_  __attribute__((warn_unused_result))
#define _likely_(x)           __builtin_expect(!!(x), 1)
#define _unlikely_(x)         __builtin_expect(!!(x), 0)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* The smaller of two values (each evaluated twice). */
#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
/* The larger of two values (each evaluated twice). */
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

/* Hand ownership of a pointer or fd to someone else: the cleanup attribute on
 * the source then sees NULL / -EBADF and does nothing. */
#define TAKE_PTR(p)                                                                                                    \
        ({                                                                                                             \
                __typeof__(p) _p_ = (p);                                                                               \
                (p) = NULL;                                                                                            \
                _p_;                                                                                                   \
        })
#define TAKE_FD(fd)                                                                                                    \
        ({                                                                                                             \
                int _fd_ = (fd);                                                                                       \
                (fd) = -EBADF;                                                                                         \
                _fd_;                                                                                                  \
        })

#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                                        \
        static inline void func##p(type *p) {                                                                          \
                if (*p)                                                                                                \
                        *p = func(*p);                                                                                 \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}

#define mfree(p)                                                                                                       \
        ({                                                                                                             \
                free(p);                                                                                               \
                (__typeof__(p)) NULL;                                                                                  \
        })

/* Return -errno of the last failed libc call, never 0 (a caller that got a
 * failure indication must not see success because errno was left unset). */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}
