/* SPDX-License-Identifier: MIT */
#pragma once

#include "macro.h"

/* Logging for programs. Library code logs at debug level at most; only main()
 * and pre-exec helpers report errors to the user. */

typedef enum LogLevel {
        LOG_LEVEL_ERROR,
        LOG_LEVEL_WARNING,
        LOG_LEVEL_INFO,
        LOG_LEVEL_DEBUG,
        _LOG_LEVEL_MAX,
        _LOG_LEVEL_INVALID = -EINVAL,
} LogLevel;

void log_set_program(const char *name);
void log_set_max_level(LogLevel level);
LogLevel log_get_max_level(void);

/* Print "program: message" to stderr. Returns -abs(error) so callers can write
 * return log_error_errno(r, "...") ; a zero error becomes -EIO. */
int log_full_errno(LogLevel level, int error, const char *fmt, ...) _printf_(3, 4);

#define log_error(...)          ((void) log_full_errno(LOG_LEVEL_ERROR, 0, __VA_ARGS__))
#define log_warning(...)        ((void) log_full_errno(LOG_LEVEL_WARNING, 0, __VA_ARGS__))
#define log_info(...)           ((void) log_full_errno(LOG_LEVEL_INFO, 0, __VA_ARGS__))
#define log_debug(...)          ((void) log_full_errno(LOG_LEVEL_DEBUG, 0, __VA_ARGS__))
#define log_error_errno(e, ...) log_full_errno(LOG_LEVEL_ERROR, (e), __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_LEVEL_DEBUG, (e), __VA_ARGS__)
