/* SPDX-License-Identifier: MIT */
#pragma once

/* An event record's data as a person reads it (lazaret events, the Ctrl+]
 * overlay): " key=value" for each field that is not null, strings as the
 * escalation prompt shows them (inert: escapes, bidi and invisible
 * characters made visible), in quotes when they hold a space, a quote, an
 * "=" or nothing (always inside [] and {}), arrays as [a, b], objects as
 * {k=v, ...}, the rest as JSON. */

#include <jansson.h>

/* The data's fields, each preceded by a space (caller frees; NULL on OOM;
 * "" for no fields). */
char *event_text_data(json_t *data);

/* One value alone, top-level quoting (caller frees; NULL on OOM). */
char *event_text_value(json_t *v);
