#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Every key of config_key_rules[] (src/config/config-authority.c), the one
classification of who may widen the sandbox, is listed in lazaret.toml(5)
under "Who may widen the sandbox" with its class, and every pattern of
config_env_names[] (env variables a workspace may not set without trust)
under its env class."""
import re
import sys

src, man = sys.argv[1], sys.argv[2]
rules = re.findall(r'\{ "([a-z_.*]+)", CONFIG_KEY_([A-Z_]+)', open(src).read())
text = open(man).read()
section = text[text.index(".SS Who may widen the sandbox"):]
section = section[:section.index("\n.SS", 1)]
# The man page's words for each class, and its spelling of the wildcards.
heading = {"AUTHORITY": "authority", "NARROW_VALUE": "narrowing value", "SUBSET": "subset",
           "UNION": "narrowing", "ENV": "env", "NEUTRAL": "neutral"}
blocks = {}
for block in re.split(r"\n\.TP\n", section)[1:]:
    first, _, rest = block.partition("\n")
    blocks[first.replace(".B ", "").strip()] = rest
missing = []
for path, cls in rules:
    if cls == "TABLE":
        continue
    name = path.replace("profiles.*.env.*", "profiles.NAME.env.VAR").replace("profiles.*", "profiles.NAME")
    body = blocks.get(heading[cls], "")
    if not re.search(r"(^|\s)" + re.escape(name) + r"(\s|,|$)", body.replace("\\-", "-"), re.M):
        missing.append(f"{name} ({heading[cls]})")
code = open(src).read()
table = code[code.index("const ConfigEnvName config_env_names[]"):]
table = table[:table.index("};")]
env_names = re.findall(r'\{ "([A-Za-z0-9_*]+)", WHY_', table)
env_body = blocks.get("env", "").replace("\\-", "-")
for name in env_names:
    if not re.search(r"^\.BR? " + re.escape(name) + r"( |$)", env_body, re.M):
        missing.append(f"{name} (env variable)")
if len(env_names) < 10:
    missing.append("config_env_names[] (not found in the source)")
if missing:
    print("lazaret.toml(5) does not list under its class: " + ", ".join(missing))
    sys.exit(1)
print(f"{len([r for r in rules if r[1] != 'TABLE'])} keys listed under their class, {len(env_names)} env patterns")
