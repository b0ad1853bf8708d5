#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, no CUDA) into build-fuzz/ and runs them.
#
#   scripts/fuzz.sh                   every target for 5 s (what scripts/test.sh runs)
#   scripts/fuzz.sh TARGET SECONDS    one target (e.g. audio_fuzz) for longer
#   scripts/fuzz.sh all SECONDS       every target for SECONDS each
#
# Each run starts from the target's seed corpus in tests/fuzz/corpus/NAME
# (NAME: the target without _fuzz) and keeps what it finds new in
# build-fuzz/corpus/NAME. It prints one line per target with the executions
# per second; a crash, a leak, a sanitizer report or a timeout leaves the
# input in build-fuzz/findings/ and makes the script exit 1. Reproduce one
# with build-fuzz/TARGET build-fuzz/findings/FILE; a fixed one goes into the
# seed corpus, so every later run replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-all}"
seconds="${2:-5}"
build_dir=build-fuzz

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
mkdir -p "$build_dir"
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DMPIASR_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >"$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log"; exit 1; }

if [[ "$target" == all ]]; then
  targets=()
  for source in tests/fuzz/*_fuzz.cpp; do targets+=("$(basename "$source" .cpp)"); done
else
  [[ -f "tests/fuzz/$target.cpp" ]] || { echo "fuzz.sh: no tests/fuzz/$target.cpp" >&2; exit 2; }
  targets=("$target")
fi
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"

mkdir -p "$build_dir/findings"
export LSAN_OPTIONS="suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0"
failed=0
for name in "${targets[@]}"; do
  seeds="tests/fuzz/corpus/${name%_fuzz}"
  work="$build_dir/corpus/${name%_fuzz}"
  log="$build_dir/$name.log"
  mkdir -p "$work"
  status=0
  # -rss_limit_mb: an input that needs more than 2 GB is a finding (memory
  # planned from a hostile header); -timeout: so is one that takes 10 s.
  "$build_dir/$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build_dir/findings/$name-" "$work" "$seeds" \
    >"$log" 2>&1 || status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  if ((status != 0)); then
    failed=1
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|artifact_prefix|Test unit written)' "$log" | head -5
    echo "fuzz: $name FAILED after ${runs:-?} executions (log $log)"
  else
    echo "fuzz: $name ${runs} executions in ${seconds} s, ${rate} per second, $(ls "$work" | wc -l) new inputs"
  fi
done
exit "$failed"
