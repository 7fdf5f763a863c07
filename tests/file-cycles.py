#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""No circle of files under src/ (issue 43).

Two files are in a circle when each depends on the other, directly or
through others. A file depends on another when
  - it includes it (#include "..."): a header circle; or
  - its object file uses a symbol the other's object file defines (nm): a
    call circle. Headers shared by several .c files (broker.h, up.h,
    config-internal.h) hide these from the #include lines alone, which is
    why the objects are read too.
A circle means neither file can be read, tested or replaced without the
other: the shared piece belongs in a file both depend on.

Usage: file-cycles.py SOURCE_ROOT BUILD_ROOT (the build's objects must
exist; meson test builds them first). Exit 1 naming each circle with the
includes and symbols that close it; 0 when there are none but the known
ones listed below.
"""
import collections
import json
import os
import re
import subprocess
import sys

# Circles known and left for a later step of issue 43, each exactly as it
# is: a file joining or leaving one fails, so the list stays true.
KNOWN = [
    # None left (issue 43 broke the last, the coordinator's seven, by
    # coordinator-loop.c under the other parts and a callback for the end
    # of a network policy update). A circle listed here must be one that is
    # there exactly as listed.
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_edges(src_root):
    """(file, included file) for every #include "..." under src/ that names
    a file under src/: the including file's own directory first, then any
    directory of src/ (the build's include paths are src/*/)."""
    files = []
    by_name = collections.defaultdict(list)
    for d, _, names in os.walk(os.path.join(src_root, "src")):
        for n in names:
            if n.endswith((".c", ".h")):
                rel = os.path.relpath(os.path.join(d, n), src_root)
                files.append(rel)
                by_name[n].append(rel)
    edges = collections.defaultdict(dict)
    for f in files:
        with open(os.path.join(src_root, f), encoding="utf-8") as fh:
            text = fh.read()
        for m in INCLUDE.finditer(text):
            near = os.path.normpath(os.path.join(os.path.dirname(f), m.group(1)))
            if near in by_name.get(os.path.basename(near), []):
                target = near
            elif len(by_name.get(m.group(1), [])) == 1:
                target = by_name[m.group(1)][0]
            else:
                continue  # a system or generated header
            if target != f:
                edges[f][target] = ['#include "%s"' % m.group(1)]
    return edges


def symbol_edges(src_root, build_root):
    """(file, defining file) for every global symbol a src/ object uses
    that another src/ object defines. A name defined by several files
    (main, or one per program) resolves to the one in the user's own
    directory, else it is left out."""
    with open(os.path.join(build_root, "compile_commands.json"), encoding="utf-8") as fh:
        commands = json.load(fh)
    objects = collections.defaultdict(set)
    for c in commands:
        src = os.path.relpath(os.path.normpath(os.path.join(c["directory"], c["file"])), src_root)
        if src.startswith("src" + os.sep) and "output" in c:
            objects[src].add(os.path.join(c["directory"], c["output"]))
    defined = collections.defaultdict(set)
    used = collections.defaultdict(set)
    for src, objs in objects.items():
        for o in objs:
            if not os.path.exists(o):
                sys.exit("file-cycles: %s is not built (%s): build first (ninja -C BUILD)" % (o, src))
            out = subprocess.run(["nm", o], capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                p = line.split()
                if len(p) == 3 and p[1] in "TDBRGSVW":
                    defined[p[2]].add(src)
                elif len(p) == 2 and p[0] == "U":
                    used[src].add(p[1])
    edges = collections.defaultdict(dict)
    for src, syms in used.items():
        for s in sorted(syms):
            owners = defined.get(s, set()) - {src}
            if len(owners) > 1:
                owners = {o for o in owners if os.path.dirname(o) == os.path.dirname(src)}
            if len(owners) == 1:
                (o,) = owners
                edges[src].setdefault(o, []).append(s)
    return edges


def circles(edges):
    """The strongly connected components of more than one file (Tarjan's,
    iterative)."""
    nodes = set(edges)
    for v in edges.values():
        nodes.update(v)
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src_root, build_root = sys.argv[1], sys.argv[2]
    edges = collections.defaultdict(dict)
    for e in (include_edges(src_root), symbol_edges(src_root, build_root)):
        for a, bs in e.items():
            for b, why in bs.items():
                edges[a].setdefault(b, []).extend(why)
    found = circles(edges)
    bad = [c for c in found if c not in KNOWN]
    gone = [k for k in KNOWN if k not in found]
    for c in sorted(bad, key=sorted):
        print("file-cycles: a circle of %d files:" % len(c))
        for a in sorted(c):
            for b, why in sorted(edges[a].items()):
                if b in c:
                    print("  %s -> %s: %s" % (a, b, ", ".join(why)))
    for k in gone:
        print("file-cycles: the known circle of %s is no longer there as listed: update KNOWN in %s"
              % (", ".join(sorted(k)), __file__))
    if bad or gone:
        print("file-cycles: move what both files need into a file (and header) of its own that both "
              "depend on; a forward declaration only hides the circle")
        return 1
    print("file-cycles: no circle of files under src/ (%d files, %d known circle(s) left)"
          % (len(set(edges) | {b for v in edges.values() for b in v}), len(KNOWN)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
