/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stddef.h>

/* Set to "1", it has the probe say user namespaces are missing (a host
 * without them, for tests). */
#define NO_USERNS_TEST_ENV "LAZARET_TEST_NO_USERNS"

typedef enum NativeMode {
        NATIVE_MODE_AUTO, /* FULL where user namespaces work, else FS-ONLY */
        NATIVE_MODE_FULL,
        NATIVE_MODE_FS_ONLY,
        _NATIVE_MODE_MAX,
        _NATIVE_MODE_INVALID = -EINVAL,
} NativeMode;

/* The mode to run in (*ret_mode) for what was asked (want), and the
 * kernel's Landlock ABI; for FS-ONLY, *why says why (shown by --check).
 * Fails, with the cause and the fix in *why, when Landlock is missing or
 * FULL was asked for where user namespaces are not available. Forks once
 * (the user namespace probe): call it before any thread is started. */
int native_probe(NativeMode want, NativeMode *ret_mode, int *ret_abi, char *why, size_t size);
