/* SPDX-License-Identifier: MIT */
/* Apart from config.c, so that the static lazaret-escalate can check a
 * profile name without the configuration loader. */
#include <string.h>

#include "profile-name.h"

bool config_profile_name_valid(const char *name) {
        size_t n = strlen(name);
        if (n < 2 || n > 32)
                return false;
        for (const char *p = name; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
                        return false;
        return true;
}
