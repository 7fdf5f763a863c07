/* SPDX-License-Identifier: MIT */
#pragma once

#include <jansson.h>

#include "strbuf.h"
#include "toml.h"

/* Write v as TOML (strings as basic strings with every control character
 * escaped, tables inline). Output parses back to the same value. */
void toml_write_value(StrBuf *b, const TomlValue *v);

/* Write a key: bare when possible, else a quoted basic string. */
void toml_write_key(StrBuf *b, const char *key);

/* v as plain JSON (strings, numbers, booleans; datetimes as RFC 3339 text,
 * non-finite floats as the strings "inf", "-inf", "nan"). New reference, or
 * NULL on OOM. */
json_t *toml_to_json(const TomlValue *v);
