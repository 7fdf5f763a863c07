/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "string-util.h"

char *strdup_or_null(const char *s) {
        return s ? strdup(s) : NULL;
}
