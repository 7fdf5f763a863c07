/* SPDX-License-Identifier: MIT */
#pragma once

/* A profile's name, checked apart from the configuration loader (config.h
 * includes this), so that the escalation protocol and the static
 * lazaret-escalate need nothing of config/. */

#include <stdbool.h>

/* True if name matches ^[a-z0-9_-]{2,32}$ (spec §3.2.3). */
bool config_profile_name_valid(const char *name);
