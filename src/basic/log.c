/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

static const char *program = "lazaret";
static LogLevel max_level = LOG_LEVEL_INFO;

void log_set_program(const char *name) {
        program = name;
}

void log_set_max_level(LogLevel level) {
        max_level = level;
}

LogLevel log_get_max_level(void) {
        return max_level;
}

int log_full_errno(LogLevel level, int error, const char *fmt, ...) {
        int r = error < 0 ? error : -error;
        if (r == 0)
                r = -EIO;
        if (level > max_level)
                return r;

        static const char *const prefix[_LOG_LEVEL_MAX] = {
                [LOG_LEVEL_ERROR] = "error: ",
                [LOG_LEVEL_WARNING] = "warning: ",
                [LOG_LEVEL_INFO] = "",
                [LOG_LEVEL_DEBUG] = "debug: ",
        };
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s: %s", program, prefix[level]);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        return r;
}
