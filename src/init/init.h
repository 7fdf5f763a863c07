/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* lazaret-init's modes beyond PID 1 (init.c). */

/* --dispense FD SERVICES: dispense-main.c. Returns the exit status. */
int dispense_main(int ctl, const char *services);

/* --fsmonitor VERSION TOKEN: git's core.fsmonitor hook, fsmonitor-hook.c.
 * Returns the exit status. */
int fsmonitor_hook_main(const char *version, const char *token);
