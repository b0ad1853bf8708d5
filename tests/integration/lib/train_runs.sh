# shellcheck shell=bash
# shellcheck disable=SC2034  # sets variables for the scripts that source it
# Helpers shared by the integration tests (tests/integration/*.sh),
# which source this file; it sits in lib/ so ctest does not run it as a test.
#
# After `train_setup BUILD_DIR SOURCE_DIR NAME [PROGRAM]`:
#   mpiasr   the program, BUILD_DIR/PROGRAM (mpiasr unless given)
#   work     BUILD_DIR/NAME, emptied
#   corpus   the 60-utterance corpus of train_e2e.sh (same cache, made on first use:
#            48 train, 6 valid, 6 test utterances)
#   tiny     the tiny config         tiny_options  overrides every test run uses
# and OpenMPI may run as root.

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

train_setup() {
  build_dir="$(cd "$1" && pwd)"
  source_dir="$(cd "$2" && pwd)"
  mpiasr="$build_dir/${4:-mpiasr}"
  work="$build_dir/$3"
  corpus="$build_dir/e2e_corpus"
  tiny="$source_dir/scripts/configs/tiny.yaml"
  [[ -x "$mpiasr" ]] || fail "$mpiasr not built (cmake --build $build_dir --target ${4:-mpiasr})"
  rm -rf "$work"
  mkdir -p "$work"
  # The arguments of train_e2e.sh, so both use one cached corpus.
  bash "$source_dir/scripts/make-corpus.sh" --out "$corpus" --utterances 60 --seed 3 \
    --valid-fraction 0.1 --test-fraction 0.1 --jobs 2 >"$work/corpus.log" ||
    { cat "$work/corpus.log"; fail "make-corpus.sh exited non-zero"; }
  tiny_options=(--data.train_manifest="$corpus/train.tsv" --data.valid_manifest="$corpus/valid.tsv"
    --data.test_manifest="$corpus/test.tsv" --training.threads=1 --training.epochs=100
    --validation.every_steps=0 --checkpoint.every_steps=0 --distributed.timeout_s=60)
  if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
}

# other_blas_core: an OpenBLAS core (OPENBLAS_CORETYPE) of another class than
# the one OpenBLAS runs here, which the CPU can still run (BUILD_DIR/
# other_blas_core, tests/kernels/other_blas_core.cpp: Haswell after an
# AVX-512 core, SkylakeX or Sandybridge after an AVX2 one); empty on an
# older CPU.
other_blas_core() {
  "$build_dir/other_blas_core" | grep -v '^skipped:' || true
}

# expect_blas_core PROGRAM CORE: PROGRAM's OpenBLAS runs on CORE with
# OPENBLAS_CORETYPE=CORE (`--version` names the core), so a run that sets it
# tests what it says.
expect_blas_core() {
  OPENBLAS_CORETYPE="$2" "$1" --version | grep -Eq "^BLAS: .*, core $2\$" ||
    fail "OPENBLAS_CORETYPE=$2 did not take: $("$1" --version | grep '^BLAS')"
}

# run_ok LOG COMMAND...: runs COMMAND with a 120 s limit, output to LOG;
# on a non-zero exit prints LOG's tail and fails.
run_ok() {
  local log="$1" rc=0
  shift
  echo "+ $*"
  timeout 120 "$@" >"$log" 2>&1 || rc=$?
  ((rc == 0)) || { tail -n 30 "$log" >&2; fail "exit code $rc (log $log)"; }
}

# run_fails LOG COMMAND...: like run_ok, but COMMAND must exit non-zero (not
# by the 120 s limit); sets `status` to its exit code.
run_fails() {
  local log="$1"
  shift
  echo "+ $*"
  status=0
  timeout 120 "$@" >"$log" 2>&1 || status=$?
  ((status != 0)) || { tail -n 30 "$log" >&2; fail "exit code 0, expected a failure (log $log)"; }
  ((status != 124)) || { tail -n 30 "$log" >&2; fail "still running after 120 s (log $log)"; }
}

# expect_exit CODE NAME COMMAND...: COMMAND exits with CODE (within 120 s);
# its stdout is in $work/NAME.out, its stderr in $work/NAME.err and both in
# $work/NAME.log.
expect_exit() {
  local code="$1" name="$2" rc=0
  shift 2
  echo "+ [$name] $*"
  timeout 120 "$@" >"$work/$name.out" 2>"$work/$name.err" || rc=$?
  cat "$work/$name.out" "$work/$name.err" >"$work/$name.log"
  ((rc == code)) || { tail -n 20 "$work/$name.log" >&2; fail "$name: exit code $rc, expected $code"; }
}

# expect_line LOG REGEX WHAT: LOG has a line matching the extended REGEX.
expect_line() {
  grep -Eq -- "$2" "$1" || { tail -n 30 "$1" >&2; fail "$3: no line matching '$2' in $1"; }
}

# state_field CHECKPOINT_DIR KEY: the value of KEY in its state.json.
state_field() {
  /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
    "$1/state.json" "$2"
}
