#!/usr/bin/env python3
"""The README's demo row names the commit its figures were measured at.

The row of README.md's results table whose first cell starts with "demo:
test CER / WER" must hold a commit hash in a code span (7 to 40 hex digits,
as `git rev-parse --short HEAD` and runs/demo/results.json write it), and
that commit must exist in this repository (git cat-file -e HASH^{commit}).
Skipped (exit 77) outside a git checkout, in a shallow clone (the commit may
lie beyond its history) or without git.

Usage: readme_demo_commit_test.py SOURCE_DIR
"""
import os
import re
import shutil
import subprocess
import sys

ROW = re.compile(r"^\|\s*demo: test CER / WER")
HASH = re.compile(r"`([0-9a-f]{7,40})`")
SKIP = 77


def git(root, *args):
    return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = os.path.abspath(sys.argv[1])
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        rows = [line for line in f if ROW.match(line)]
    if len(rows) != 1:
        print("FAIL: README.md has %d rows starting '| demo: test CER / WER', not 1" % len(rows),
              file=sys.stderr)
        return 1
    hashes = HASH.findall(rows[0])
    if not hashes:
        print("FAIL: README.md's demo row names no commit (a hash in a code span):\n" + rows[0],
              file=sys.stderr)
        return 1
    commit = hashes[0]
    if shutil.which("git") is None:
        print("SKIP: no git program to look up commit %s" % commit)
        return SKIP
    if git(root, "rev-parse", "--is-inside-work-tree").stdout.strip() != "true":
        print("SKIP: %s is not a git checkout; the demo row names commit %s" % (root, commit))
        return SKIP
    if git(root, "rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        print("SKIP: %s is a shallow clone; commit %s may lie beyond its history" % (root, commit))
        return SKIP
    if git(root, "cat-file", "-e", commit + "^{commit}").returncode != 0:
        print("FAIL: README.md's demo row names commit %s, which this repository does not hold"
              % commit, file=sys.stderr)
        return 1
    subject = git(root, "log", "-1", "--format=%h %ad %s", "--date=short", commit).stdout.strip()
    print("README demo row: measured at %s" % subject[:120])
    return 0


if __name__ == "__main__":
    sys.exit(main())
