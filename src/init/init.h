/* SPDX-License-Identifier: MIT */
#pragma once

/* lazaret-init's modes beyond PID 1 (init.c). */

/* --dispense FD SERVICES: dispense-main.c. Returns the exit status. */
int dispense_main(int ctl, const char *services);
