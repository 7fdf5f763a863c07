/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Built-in presets (issue 24): a profile that says `preset = "NAME"` starts
 * from NAME's keys, the lowest layer of the configuration: every file the
 * person wrote (and a trusted workspace file) sets over it, key by key as
 * files merge. Only these names, never a path. Each preset's keys are TOML
 * text for [profiles.P] (config.c adds it as a source of its own, named
 * "preset NAME", so `lazaret config show` says where a value came from). */
typedef struct Preset {
        const char *name;
        const char *agent; /* what it runs, for messages and lazaret init */
        const char *image_flavour; /* lazaret image build FLAVOUR makes its image */
        const char *body; /* the keys of [profiles.P] */
} Preset;

extern const Preset presets[];
extern const size_t presets_n;

const Preset *preset_find(const char *name);

/* "claude, codex, aider, gemini, opencode and shell", for messages. */
extern const char preset_names[];
