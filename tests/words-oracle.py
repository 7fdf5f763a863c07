#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""words_split against Python's shlex.split (POSIX mode, no comments) as an
independent oracle, over a generated corpus: quotes of both kinds, escapes
inside and outside them, empty strings, whitespace of every kind, unicode
(including bidi marks and multi-byte letters) and the shell's
metacharacters. Every input must give the same words, or fail in both.

  words-oracle.py WORDS_TOOL [--count N] [--seed S]
"""
import argparse
import json
import random
import shlex
import subprocess
import sys

PIECES = ["a", "b", "ls", "-l", "--x=1", " ", "  ", "\t", "\n", "\r", "'", '"', "\\", "''", '""',
          "'a b'", '"a b"', '"a\\"b"', '"\\\\"', '"\\$x"', "\\ ", "\\'", '\\"', "\\\\", "$", "$(x)", "`x`",
          ";", "|", "&", ">", "<", "(", ")", "#", "*", "~", "é", "日本", "\u202e", "\u2066", "🙂", "=", ",",
          "'\"'", "\"'\"", "\\\n", "'\\n'", "\"\\n\""]


def corpus(n, rng):
    fixed = ["", " ", "a", "a b", "  a   b  ", "''", '""', "'' ''", "a''b", 'a""b', "'a'\"b\"c",
             "\\", "'", '"', "'unterminated", '"unterminated', 'x\\', '"a\\"', '"\\', "a\\ b", "\\\\",
             '"\\a"', "'\\a'", "\\a", 'say "hi there" \'and "you"\'', "ls -l /tmp", "echo $HOME",
             "\t\r\n", "a\nb", "é è", "\u202eabc", "日本 語"]
    out = list(fixed)
    for _ in range(n - len(fixed)):
        out.append("".join(rng.choice(PIECES) for _ in range(rng.randint(1, 12))))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=20261130)
    args = ap.parse_args()
    inputs = corpus(args.count, random.Random(args.seed))
    r = subprocess.run([args.tool], input=json.dumps(inputs), capture_output=True, text=True, check=True)
    got = json.loads(r.stdout)
    assert len(got) == len(inputs)
    bad = 0
    ok_words = errors = 0
    for s, g in zip(inputs, got):
        try:
            want = {"words": shlex.split(s)}
        except ValueError as e:
            want = {"error": str(e)}
        if ("error" in want) != ("error" in g) or want.get("words") != g.get("words"):
            bad += 1
            if bad <= 10:
                print(f"MISMATCH for {s!r}: shlex {want} vs words_split {g}", file=sys.stderr)
        elif "error" in want:
            errors += 1
        else:
            ok_words += 1
    print(f"words-oracle: {len(inputs)} inputs, {ok_words} split alike, {errors} refused by both, {bad} differ")
    # The corpus must exercise both outcomes, or the comparison says little.
    return 1 if bad or ok_words < len(inputs) // 4 or errors < 10 else 0


if __name__ == "__main__":
    sys.exit(main())
