/* SPDX-License-Identifier: MIT */
#pragma once

/* The event overlay of `lazaret run` (Ctrl+]): the latest records of the
 * Domain's event record, newest at the bottom, scrollable, filtered by
 * source; pause and resume of the sandbox. Drawn through the terminal
 * layer (tui.h); every line is ASCII (a record's data is shown as its JSON,
 * which escapes everything else), so nothing of a record can act on the
 * terminal. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tui.h"

typedef struct Overlay Overlay;

typedef enum OverlayAction {
        OVERLAY_NONE,
        OVERLAY_CLOSE, /* Esc, q or Ctrl+] */
        OVERLAY_PAUSE, /* p: pause the sandbox, or resume it when paused */
} OverlayAction;

/* Open it on <domain_dir>/events: the last records. -ENOMEM. */
int overlay_open(const char *domain_dir, Overlay **ret);
Overlay *overlay_close(Overlay *o);

/* Read what was appended since. true when there is something new. */
bool overlay_refresh(Overlay *o);

/* Keys typed while it is up (each call one read's worth). */
OverlayAction overlay_keys(Overlay *o, const uint8_t *p, size_t n);

/* Draw it: rows x columns is the sandbox's screen. */
int overlay_draw(Overlay *o, Tui *t, unsigned rows, bool paused, const char *pause_error);
