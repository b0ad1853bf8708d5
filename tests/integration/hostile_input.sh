#!/usr/bin/env bash
# The mpiasr program against a hostile user: bad command lines, unreadable
# and broken files, impossible settings. Each case checks the exit code of
# its kind (2 usage or config, 3 input data, 4 checkpoint, 6 diverged) and
# that the message names the culprit, or that the program copes (exit 0).
# Uses the corpus of train_e2e.sh and a tiny checkpoint trained here.
# Usage: bash hostile_input.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" hostile_input

# expect_exit CODE NAME COMMAND...: COMMAND exits with CODE (within 120 s);
# its output is in $work/NAME.log.
expect_exit() {
  local code="$1" name="$2" rc=0
  shift 2
  echo "+ [$name] $*"
  timeout 120 "$@" >"$work/$name.log" 2>&1 || rc=$?
  ((rc == code)) || { tail -n 20 "$work/$name.log" >&2; fail "$name: exit code $rc, expected $code"; }
}

# Unknown command: named, with the nearest one.
expect_exit 2 unknown_command "$mpiasr" trian "$tiny"
expect_line "$work/unknown_command.log" \
  "^mpiasr: error: unknown command 'trian'; did you mean 'train'\? \(commands: import, prepare, train, eval, transcribe, lm\)$" \
  "unknown command"

echo "hostile_input: all checks passed"
