#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Every man page renders with no roff request showing as text (issue 42:
lazaret(1)'s FILES showed a raw ".TP" glued to the line before it) and no
warning from groff itself."""
import re
import subprocess
import sys

bad = []
for page in sys.argv[1:]:
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", page], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    if r.returncode != 0:
        bad.append(f"{page}: groff failed: {r.stderr.strip()}")
        continue
    text = re.sub(r".\x08", "", r.stdout)
    for n, line in enumerate(text.splitlines(), 1):
        if re.search(r"(^|[^A-Za-z0-9])\.(TP|PP|SH|SS|B|BR|I|IR|RB|RI|BI|IB|IP|LP|P|RS|RE|nf|fi|br|sp)(\s|$)", line):
            bad.append(f"{page}: rendered line {n} shows a roff request: {line.strip()}")
    for w in r.stderr.splitlines():
        bad.append(f"{page}: groff: {w}")
if bad:
    print("\n".join(bad))
    sys.exit(1)
print(f"{len(sys.argv) - 1} man pages render cleanly")
