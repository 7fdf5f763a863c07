/* SPDX-License-Identifier: MIT */
#pragma once

/* Local images made without a registry (lazaret image build). */

/* The Network Sidecar image's name for the lazaret-netd installed beside
 * this program: localhost/lazaret/sidecar:netd-<first 12 hex digits of its
 * SHA-256>, so a new netd gets a new image. */
int image_sidecar_ref(char **ret);

/* Build the sidecar image as ref; 0 or an exit status (errors logged). */
int image_build_sidecar(const char *ref);
