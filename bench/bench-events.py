#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What the event record costs (issue 19): the same work in two Domains,
side by side and alternating, one recording and one whose record cannot be
opened (its events/ replaced by a file: the coordinator then runs without
it, as it would on a full disk, and without gVisor's trace of the
processes inside, which only the recording side pays for).

  cold:      lazaret run -- true, in a git repository of 2,000 files in
             branch mode (the record: the sandbox's start and stop, the
             session, the files it changed by host git at its end)
  teardown:  from the run's start until its coordinator is gone (the files
             changed are read before that)
  git:       one session of the Debian image running git status and a
             commit five times (through the git router)
  read:      lazaret events over a record of 100,000 records (reported)
  report:    lazaret report in each format over the same (budget: 1 s)

Prints medians and ratios; exits 1 when recording costs more than 5%
(ratio above 1.05) on cold start or git, or a report takes a second.

  sudo bench/bench-events.py [--user lazaret-test] [--rounds 11] [--build build]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from benchlib import Stage, parse_args

BUSYBOX = "localhost/lazaret/busybox:latest"
DEBIAN = "localhost/lazaret/debian:bookworm"
GITENV = ["GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b"]


REPORT_FORMATS = ("md", "html", "json", "jsonl", "sarif")


def append_record(path, n):
    """n records of a busy agent's day: sessions of 1,000 records each (an
    escalation, files changed at the end), between them connections to 500
    names (most refused) and git refusals of 200 paths."""
    def rec(i, session, source, kind, data):
        return json.dumps({"time": f"2026-12-01T{i // 3600000 % 24:02}:{i // 60000 % 60:02}:{i // 1000 % 60:02}."
                                   f"{i % 1000:03}000Z", "seq": i + 1, "generation": 9, "session": session,
                           "source": source, "kind": kind, "data": data}, separators=(",", ":")) + "\n"
    with open(path, "a") as f:
        i = 0
        while i < n:
            sid = f"{i:08x}-0000-4000-8000-000000000000"
            f.write(rec(i, sid, "session", "started", {"argv": ["agent", "--task", str(i)], "cwd": "/workspace",
                                                       "terminal": True, "cli_pid": 42, "user": "bench"}))
            f.write(rec(i + 1, sid, "escalation", "requested", {"request_id": sid, "command": "make test"}))
            f.write(rec(i + 2, sid, "escalation", "decided", {"request_id": sid, "command": "make test",
                                                              "decision": "denied", "decided_by": "user"}))
            for k in range(i + 3, min(i + 997, n)):
                if k % 5 == 0:
                    f.write(rec(k, None, "git", "refused", {"rule": "git", "op": "write",
                                                            "path": f".git/hooks/h{k % 200}", "errno": "EROFS"}))
                else:
                    f.write(rec(k, None, "network", "connection",
                                {"via": "http", "host": f"h{k % 500}.example.test", "port": 443,
                                 "verdict": "refused" if k % 7 else "allowed",
                                 "reason": "name-not-listed" if k % 7 else None, "bytes_out": 100, "bytes_in": 900}))
            f.write(rec(i + 997, sid, "session", "ended", {"outcome": "Exited", "exit_code": 0, "duration_ms": 9}))
            f.write(rec(i + 998, sid, "files", "changed",
                        {"root": "/w", "since": "0" * 40, "truncated": False,
                         "files": [{"path": f"src/f{x}.c", "added": x, "deleted": 1} for x in range(20)]}))
            f.write(rec(i + 999, None, "record", "dropped", {"count": 0, "total": 0}))
            i += 1000


def main():
    args = parse_args(11)
    st = Stage("bench-events", args.user, args.build)
    pw, lz, run = st.pw, st.lz, st.run
    try:
        # Two identical repositories, each with a Domain of its own.
        sides = {}
        for side in ("on", "off"):
            work = os.path.join(st.base, f"work-{side}")
            data = os.path.join(st.base, f"data-{side}")
            for d in (work, data):
                os.makedirs(d)
                os.chown(d, pw.pw_uid, pw.pw_gid)
            run(["sh", "-c", "git init -q -b main && for d in $(seq 1 20); do mkdir d$d; "
                 "for f in $(seq 1 100); do echo $d.$f > d$d/f$f; done; done && git add -A && "
                 "git commit -qm base"], cwd=work, env=GITENV, timeout=300)
            cfg = st.config(BUSYBOX, name=f"cfg-{side}.toml")
            text = open(cfg).read().replace(st.data, data)
            text += f'\n[profiles.git]\nimage = "{DEBIAN}"\nrunsc_network = "sandbox"\n'
            with open(cfg, "w") as f:
                f.write(text)
            sides[side] = (work, data, cfg)
        run([lz, "image", "build", "busybox"], timeout=600)
        if run(["podman", "image", "exists", DEBIAN], check=False).returncode != 0:
            run([lz, "image", "build", "debian"], timeout=1500)

        def coordinator_gone():
            deadline = time.time() + 60
            while time.time() < deadline:
                r = subprocess.run(["pgrep", "-u", pw.pw_name, "-f", "__coordinator"], capture_output=True)
                if r.returncode != 0:
                    return
                time.sleep(0.02)
            sys.exit("bench-events: a coordinator did not finish its teardown")

        def lazaret(side, *argv, timeout=600):
            work, _, cfg = sides[side]
            return run([lz, "--config", cfg] + list(argv), cwd=work, env=GITENV, timeout=timeout)

        def domains(side):
            d = os.path.join(sides[side][1], "domains")
            return [os.path.join(d, x) for x in os.listdir(d)]

        for side in sides:
            for profile in ("bench", "git"):
                lazaret(side, "run", profile, "--", "/bin/true")
                coordinator_gone()
        # The "off" Domains' records cannot be opened from now on.
        for dom in domains("off"):
            shutil.rmtree(os.path.join(dom, "events"))
            with open(os.path.join(dom, "events"), "w") as f:
                f.write("not a directory\n")
        r = lazaret("off", "run", "bench", "--", "/bin/true")
        if "no event record" not in r.stderr:
            sys.exit(f"bench-events: the record of the off side was not turned off: {r.stderr}")
        coordinator_gone()

        cold = {"on": [], "off": []}
        down = {"on": [], "off": []}
        # Alternating, and which side goes first alternates too.
        def order(i):
            return ("on", "off") if i % 2 == 0 else ("off", "on")

        for i in range(args.rounds):
            for side in order(i):
                t = time.perf_counter()
                lazaret(side, "run", "bench", "--", "/bin/true")
                cold[side].append(time.perf_counter() - t)
                coordinator_gone()
                down[side].append(time.perf_counter() - t)

        script = ("cd /workspace && export GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@b GIT_COMMITTER_NAME=b "
                  "GIT_COMMITTER_EMAIL=b@b && for i in 1 2 3 4 5; do git status >/dev/null; echo $i >> d1/f1; "
                  "git add -A; git commit -qm r$i; done")
        gitt = {"on": [], "off": []}
        for i in range(max(4, args.rounds // 2)):
            for side in order(i):
                t = time.perf_counter()
                lazaret(side, "run", "git", "--", "/bin/sh", "-c", script)
                gitt[side].append(time.perf_counter() - t)
                coordinator_gone()

        # A record of 100,000 records, read back and reported.
        [dom_on] = [d for d in domains("on") if '"profile":"bench"' in open(d + "/events/events.jsonl").read()]
        append_record(os.path.join(dom_on, "events", "events.jsonl"), 100000)
        reads = {}
        for form in ("text", "json"):
            t = time.perf_counter()
            r = lazaret("on", "events", "bench", *(["--json"] if form == "json" else []))
            reads[form] = time.perf_counter() - t
            if r.stdout.count("\n") < 100000:
                sys.exit(f"bench-events: lazaret events printed {r.stdout.count(chr(10))} lines")
        reports = {}
        for form in REPORT_FORMATS:
            times = []
            for _ in range(3):
                t = time.perf_counter()
                r = lazaret("on", "report", "bench", "--format", form)
                times.append(time.perf_counter() - t)
                if "h499.example.test" not in r.stdout:
                    sys.exit(f"bench-events: lazaret report --format {form} lacks a destination")
            reports[form] = statistics.median(times)
    finally:
        st.remove()

    def ratio(d):
        return statistics.median(d["on"]) / statistics.median(d["off"])

    print(f"bench-events ({args.rounds} rounds, medians, recording vs not, side by side):")
    for name, d, budget in (("cold", cold, "budget 1.05"), ("teardown", down, "reported"),
                            ("git", gitt, "budget 1.05")):
        print(f"  {name:9} recording {statistics.median(d['on']) * 1000:8.1f} ms   "
              f"not {statistics.median(d['off']) * 1000:8.1f} ms   ratio {ratio(d):.3f} ({budget})")
    print(f"  lazaret events over 100,000 records: text {reads['text']:.2f} s, --json {reads['json']:.2f} s")
    print("  lazaret report over the same (budget 1 s; ratio to lazaret events --json): " + ", ".join(
        f"{f} {reports[f]:.2f} s ({reports[f] / reads['json']:.2f})" for f in REPORT_FORMATS))
    return 0 if ratio(cold) <= 1.05 and ratio(gitt) <= 1.05 and max(reports.values()) < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
