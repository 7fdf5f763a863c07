#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Run a toml-test decoder over the toml-test corpus.

Usage: toml-test-run.py DECODER CORPUS_DIR

Every valid/**/X.toml must decode (exit 0) to JSON equal by value to X.json,
compared as ../shared/testdata/toml-test/FORMAT.md says. Every
invalid/**/X.toml must be rejected: exit status 1 with a
"toml-decoder: LINE:COL: message" diagnostic, not a crash, a signal, a
sanitizer report or a timeout. Standard library only.
"""

import concurrent.futures
import json
import math
import os
import re
import subprocess
import sys

TIMEOUT = 10
# The corpus holds 568 cases (166 valid, 402 invalid; 736 files counting the
# .json expectations). Fewer than this means a wrong or truncated corpus.
MIN_CASES = 550

SANITIZER_MARKERS = (
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
    "SUMMARY: UndefinedBehaviorSanitizer",
    "SUMMARY: AddressSanitizer",
)
DIAGNOSTIC = re.compile(r"^toml-decoder: [1-9][0-9]*:[1-9][0-9]*: \S.*$", re.M)

DATETIME = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$")
DATETIME_LOCAL = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?$")
DATE_LOCAL = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
TIME_LOCAL = re.compile(r"^(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?$")

SCALAR_TYPES = {"string", "integer", "float", "bool", "datetime", "datetime-local", "date-local",
                "time-local"}


class Mismatch(Exception):
    pass


def days_from_civil(y, m, d):
    """Days since 1970-01-01 in the proleptic Gregorian calendar (any year)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def millis(frac):
    """Fractional seconds truncated to milliseconds."""
    return int((frac or "").ljust(3, "0")[:3])


def parse_float(s):
    t = s.lower()
    if t in ("inf", "+inf"):
        return math.inf
    if t == "-inf":
        return -math.inf
    if t in ("nan", "+nan", "-nan"):
        return math.nan
    return float(s)


def scalar_key(typ, value, where):
    """A value to compare with ==, from the text of a tagged scalar."""
    try:
        if typ == "string":
            return value
        if typ == "integer":
            return int(value)
        if typ == "bool":
            if value not in ("true", "false"):
                raise ValueError(value)
            return value
        if typ == "float":
            f = parse_float(value)
            return "nan" if math.isnan(f) else f
        if typ == "datetime":
            m = DATETIME.match(value)
            if not m:
                raise ValueError(value)
            y, mo, d, h, mi, sec = (int(x) for x in m.groups()[:6])
            off = m.group(8)
            off_min = 0
            if off not in ("Z", "z"):
                off_min = (int(off[1:3]) * 60 + int(off[4:6])) * (-1 if off[0] == "-" else 1)
            secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off_min * 60
            return secs * 1000 + millis(m.group(7))
        if typ == "datetime-local":
            m = DATETIME_LOCAL.match(value)
            if not m:
                raise ValueError(value)
            return tuple(int(x) for x in m.groups()[:6]) + (millis(m.group(7)),)
        if typ == "date-local":
            m = DATE_LOCAL.match(value)
            if not m:
                raise ValueError(value)
            return tuple(int(x) for x in m.groups())
        if typ == "time-local":
            m = TIME_LOCAL.match(value)
            if not m:
                raise ValueError(value)
            return tuple(int(x) for x in m.groups()[:3]) + (millis(m.group(4)),)
    except (ValueError, TypeError) as e:
        raise Mismatch(f"{where}: cannot read {typ} value {value!r} ({e})")
    raise Mismatch(f"{where}: unknown type {typ!r}")


def is_scalar(v):
    return (isinstance(v, dict) and set(v) == {"type", "value"} and isinstance(v["type"], str)
            and isinstance(v["value"], str))


def kind(v):
    if is_scalar(v):
        return v["type"]
    if isinstance(v, dict):
        return "table"
    if isinstance(v, list):
        return "array"
    return type(v).__name__


def compare(expected, got, where):
    if is_scalar(expected):
        if not is_scalar(got):
            raise Mismatch(f"{where}: expected {expected['type']}, got {kind(got)}")
        if expected["type"] != got["type"]:
            raise Mismatch(f"{where}: expected type {expected['type']}, got {got['type']}")
        if expected["type"] not in SCALAR_TYPES:
            raise Mismatch(f"{where}: unknown type {expected['type']!r}")
        e = scalar_key(expected["type"], expected["value"], where + " (expected)")
        g = scalar_key(got["type"], got["value"], where)
        if e != g:
            raise Mismatch(f"{where}: expected {expected['type']} {expected['value']!r}, "
                           f"got {got['value']!r}")
        return
    if isinstance(expected, dict):
        if not isinstance(got, dict) or is_scalar(got):
            raise Mismatch(f"{where}: expected table, got {kind(got)}")
        missing = sorted(set(expected) - set(got))
        extra = sorted(set(got) - set(expected))
        if missing or extra:
            raise Mismatch(f"{where}: keys differ (missing {missing}, unexpected {extra})")
        for k in expected:
            compare(expected[k], got[k], f"{where}.{json.dumps(k, ensure_ascii=False)}")
        return
    if isinstance(expected, list):
        if not isinstance(got, list):
            raise Mismatch(f"{where}: expected array, got {kind(got)}")
        if len(expected) != len(got):
            raise Mismatch(f"{where}: expected {len(expected)} array elements, got {len(got)}")
        for i, (e, g) in enumerate(zip(expected, got)):
            compare(e, g, f"{where}[{i}]")
        return
    raise Mismatch(f"{where}: malformed expectation {expected!r}")


def run_decoder(decoder, path):
    with open(path, "rb") as f:
        return subprocess.run([decoder], stdin=f, capture_output=True, timeout=TIMEOUT)


def sanitizer_report(stderr):
    return any(m in stderr for m in SANITIZER_MARKERS)


def check_valid(decoder, toml_path, json_path):
    try:
        with open(json_path, "rb") as f:
            expected = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError) as e:
        return f"cannot read expectation {json_path}: {e}"
    try:
        p = run_decoder(decoder, toml_path)
    except subprocess.TimeoutExpired:
        return f"timed out after {TIMEOUT} s"
    stderr = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0:
        return f"killed by signal {-p.returncode}: {stderr.strip()[:500]}"
    if sanitizer_report(stderr):
        return f"sanitizer report: {stderr.strip()[:2000]}"
    if p.returncode != 0:
        return f"rejected a valid document (exit {p.returncode}): {stderr.strip()[:500]}"
    try:
        got = json.loads(p.stdout.decode("utf-8"))
    except ValueError as e:
        return f"decoder wrote invalid JSON ({e}): {p.stdout[:200]!r}"
    try:
        compare(expected, got, "$")
    except Mismatch as e:
        return str(e)
    return None


def check_invalid(decoder, toml_path):
    try:
        p = run_decoder(decoder, toml_path)
    except subprocess.TimeoutExpired:
        return f"timed out after {TIMEOUT} s"
    stderr = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0:
        return f"killed by signal {-p.returncode}: {stderr.strip()[:500]}"
    if sanitizer_report(stderr):
        return f"sanitizer report: {stderr.strip()[:2000]}"
    if p.returncode == 0:
        return f"accepted an invalid document: {p.stdout.decode('utf-8', 'replace').strip()[:300]}"
    if p.returncode != 1:
        return f"exit status {p.returncode}, expected 1: {stderr.strip()[:500]}"
    if p.stdout:
        return f"wrote a partial result: {p.stdout[:200]!r}"
    if not DIAGNOSTIC.search(stderr):
        return f"diagnostic is not 'toml-decoder: LINE:COL: message': {stderr.strip()[:300]!r}"
    return None


def find_cases(corpus, sub):
    out = []
    top = os.path.join(corpus, sub)
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(".toml"):
                out.append(os.path.join(dirpath, name))
    return out


def main(argv):
    if len(argv) != 3:
        print("usage: toml-test-run.py DECODER CORPUS_DIR", file=sys.stderr)
        return 2
    decoder, corpus = os.path.abspath(argv[1]), argv[2]
    if not os.access(decoder, os.X_OK):
        print(f"toml-test: decoder {decoder} is not executable", file=sys.stderr)
        return 1

    valid = find_cases(corpus, "valid")
    invalid = find_cases(corpus, "invalid")
    jobs = [(path, "valid") for path in valid] + [(path, "invalid") for path in invalid]

    def work(job):
        path, what = job
        if what == "valid":
            return check_valid(decoder, path, path[:-len(".toml")] + ".json")
        return check_invalid(decoder, path)

    failures = []
    n_valid = n_invalid = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        for (path, what), reason in zip(jobs, pool.map(work, jobs)):
            rel = os.path.relpath(path, corpus)
            if reason is None:
                if what == "valid":
                    n_valid += 1
                else:
                    n_invalid += 1
            else:
                failures.append(rel)
                print(f"FAIL {rel}: {reason}")

    total = len(jobs)
    if total < MIN_CASES or not valid or not invalid:
        print(f"toml-test: only {total} cases ({len(valid)} valid, {len(invalid)} invalid) under "
              f"{corpus}; expected at least {MIN_CASES}: wrong or incomplete corpus")
        failures.append("(corpus)")

    print(f"toml-test: {n_valid} valid passed, {n_invalid} invalid rejected, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
