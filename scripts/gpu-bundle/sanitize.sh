#!/usr/bin/env bash
# compute-sanitizer's four tools over the whole of both GPU tests, run from
# the folder scripts/gpu-bundle.sh packs, on a machine with an NVIDIA GPU
# (a check by hand, after run.sh: about 2 minutes on an H200; run.sh's
# profile step has Nsight Compute's time for each kernel of a step):
#
#   bash gpu-bundle/sanitize.sh OUTDIR [PROGRAM...]
#
# Each PROGRAM is another build of cuda_kernels_test (a planted fault:
# docs/gpu.md, "Races the GPU shows") that runs its attention tests 5 times
# as they are, then once under racecheck.
#
# OUTDIR gets sanitize.txt, a line a run (exit code, seconds, the tool's
# summary, the tests passed and failed, the lines naming a hazard), and
# sanitize-logs.tar.gz (every log), both rewritten after each run. Exit status 0; the verdicts are in sanitize.txt.
set -uo pipefail
bundle_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ $# -lt 1 ]]; then
  echo "usage: bash sanitize.sh OUTDIR [PROGRAM...]" >&2
  exit 2
fi
mkdir -p "$1" && out="$(cd "$1" && pwd)" || exit 2
shift
work="$(mktemp -d "${TMPDIR:-/tmp}/mpiasr-sanitize.XXXXXX")" || exit 1
trap 'rm -rf "$work"' EXIT
B="$work/bundle" logs="$work/logs"
mkdir -p "$B" "$logs"
xz -dc "$bundle_dir/payload.tar.xz" | tar -x -C "$B" || { echo "sanitize.sh: cannot unpack" >&2; exit 1; }
# shellcheck source=env.sh
source "$B/env.sh" > "$logs/libraries.log" 2>&1
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
: > "$out/sanitize.txt"

# Runs one command with the bundle's libraries under a time limit and adds its line.
one() {  # name seconds command...
  local name=$1 limit=$2 began rc log
  shift 2
  log="$logs/$name.log"
  began=$(date +%s)
  timeout "$limit" env LD_LIBRARY_PATH="$MPIASR_LD_LIBRARY_PATH" "$@" > "$log" 2>&1
  rc=$?
  printf '%-26s exit %-3s %3s s  %s; %s passed, %s failed; %s lines name a hazard\n' "$name" "$rc" \
    "$(($(date +%s) - began))" "$(grep -m1 -E '(ERROR|RACECHECK) SUMMARY' "$log" | sed 's/^=* *//')" \
    "$(grep -c '^\[       OK \]' "$log")" "$(grep -c '^\[  FAILED  \] [^ ]* (' "$log")" \
    "$(grep -c hazard "$log")" | tee -a "$out/sanitize.txt"
  tar -czf "$out/sanitize-logs.tar.gz" -C "$work" logs
}
check() {  # tool program seconds [gtest arguments...]
  local name=$1 program=$2 limit=$3
  shift 3
  one "${program}_$name" "$limit" "$sanitizer" --tool "$name" --error-exitcode 99 --print-limit 20 \
    "$B/bin/$program" --gtest_color=no "$@"
}

for program in "$@"; do
  name=$(basename "$program")
  one "${name}_plain" 30 "$program" --gtest_color=no --gtest_filter='CudaAttention*' --gtest_repeat=5
  one "${name}_racecheck" 45 "$sanitizer" --tool racecheck --error-exitcode 99 --print-limit 10 \
    "$program" --gtest_color=no --gtest_filter='CudaAttention*'
done
for name in racecheck synccheck initcheck memcheck; do
  check "$name" cuda_kernels_test 60
done
check racecheck cuda_training_test 60
check memcheck cuda_training_test 45
check initcheck cuda_training_test 45

exit 0
