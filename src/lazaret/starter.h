/* SPDX-License-Identifier: MIT */
#pragma once

/* The commented starter configuration that 'lazaret init' writes. The
 * escalation socket directory is this user's runtime directory
 * ($XDG_RUNTIME_DIR, else /tmp/lazaret-<uid>). Caller frees. */
int starter_config(char **ret);
