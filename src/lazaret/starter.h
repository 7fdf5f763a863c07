/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>

/* The commented starter configuration that 'lazaret init' writes. The
 * escalation socket directory is this user's runtime directory
 * ($XDG_RUNTIME_DIR, else /tmp/lazaret-<uid>). sandbox_network_ok says
 * whether runsc --network=sandbox works on this host (doctor's runsc-network
 * check); when not, the profile says runsc_network = "host", with why.
 * Caller frees. */
int starter_config(bool sandbox_network_ok, char **ret);
