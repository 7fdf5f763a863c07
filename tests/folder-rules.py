#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Each folder under src/ says what lives there and what it may include
(issue 43): its README.md ends with a line

    May include: basic, shared, launch

naming folders under src/ ("nothing but libc" for none). A file that
includes a header of a folder its README does not name fails, as does a
folder of C files without a README, or with no such line. A header is
found where it lives (its name is unique under src/); a folder's own
headers are always allowed.

Usage: folder-rules.py SOURCE_ROOT. Exit 1 naming each include that breaks
a rule; 0 when there is none.
"""
import os
import re
import sys


def main():
    root = os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "src")
    folders = {}
    for d, _, files in os.walk(root):
        if any(f.endswith((".c", ".h")) for f in files):
            folders[os.path.relpath(d, root)] = sorted(f for f in files if f.endswith((".c", ".h")))
    where, errors = {}, []
    for d, files in folders.items():
        for f in files:
            if f.endswith(".h"):
                if f in where:
                    errors.append(f"{f}: in src/{where[f]} and src/{d}: a header's name must be unique")
                where[f] = d
    allowed = {}
    for d in folders:
        readme = os.path.join(root, d, "README.md")
        if not os.path.exists(readme):
            errors.append(f"src/{d}: no README.md saying what lives there and what it may include")
            continue
        m = re.search(r"^May include: (.*)$", open(readme).read(), re.M)
        if not m:
            errors.append(f"src/{d}/README.md: no 'May include:' line")
            continue
        names = [] if m.group(1).strip() == "nothing but libc" else [x.strip() for x in m.group(1).split(",")]
        unknown = [x for x in names if x not in folders]
        if unknown:
            errors.append(f"src/{d}/README.md: may include {', '.join(unknown)}, which is no folder of C files")
        allowed[d] = set(names) | {d}
    for d, files in folders.items():
        for f in files:
            text = open(os.path.join(root, d, f), errors="replace").read()
            for m in re.finditer(r'^#include "([^"]+)"', text, re.M):
                h = os.path.basename(m.group(1))
                if h not in where or d not in allowed:
                    continue  # a generated or a test header; a folder already reported
                if where[h] not in allowed[d]:
                    errors.append(f"src/{d}/{f} includes {h} (src/{where[h]}), which src/{d}/README.md does not allow")
    for e in errors:
        print(f"folder-rules: {e}")
    if errors:
        print("folder-rules: move the shared piece to a folder both may include, or, when the dependency is "
              "meant, name the folder in the README's 'May include:' line")
        return 1
    print(f"folder-rules: {len(folders)} folders, every include allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
