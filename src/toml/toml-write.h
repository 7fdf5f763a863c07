/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>

#include "strbuf.h"
#include "toml.h"

/* Write v as TOML (strings as basic strings with every control character,
 * and every character prompt-text shows escaped (C1 controls, bidi marks,
 * invisible characters), as a \u or \U escape; tables inline). Output
 * parses back to the same value, and nothing in it moves the cursor or
 * reorders text on a terminal. Bytes that are not UTF-8, which no parsed
 * value holds, are copied as they are. */
void toml_write_value(StrBuf *b, const TomlValue *v);

/* Write a key: bare when possible, else a quoted basic string. */
void toml_write_key(StrBuf *b, const char *key);

/* v as plain JSON (strings, numbers, booleans; datetimes as RFC 3339 text,
 * non-finite floats as the strings "inf", "-inf", "nan"). New reference, or
 * NULL on OOM. */
json_t *toml_to_json(const TomlValue *v);
