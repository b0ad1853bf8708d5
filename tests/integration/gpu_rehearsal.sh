#!/usr/bin/env bash
# The GPU check rehearsed on the SIMT emulator: scripts/gpu-bundle.sh
# --emulated packs from BUILD_DIR the programs of the emulation build
# (mpiasr_emu, cuda_kernels_test_emu, ... under the GPU build's names), and
# the bundle's own run.sh runs all its steps, checks and thresholds at the
# rehearsal's sizes (MPIASR_CHECK_SIZES=rehearsal), with the stand-ins of
# tests/integration/lib/emulated_gpu (nvidia-smi, compute-sanitizer) first on
# the PATH, and Debian's python3 (python3-torch) as the python3 that holds
# PyTorch. The emulated device presents itself as an H200 to every probe.
# Passes when run.sh exits 0 and every row of its summary.tsv is PASS (the
# NCCL rows run nccl_test on the emulated NCCL), except profile, which skips
# for want of Nsight Compute, and torch.compile's rows, which may skip
# (Debian's PyTorch 1.13 has no torch.compile); PyTorch's eager step ran on
# both models beside mpiasr's. Prints run.sh's table.
# SKIP when BUILD_DIR has no mpiasr_emu (MPIASR_CUDA_EMU off, or no CUDA toolkit).
# Usage: bash gpu_rehearsal.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
work="$build_dir/gpu_rehearsal"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

if [[ ! -x "$build_dir/mpiasr_emu" ]]; then
  echo "SKIP: $build_dir has no mpiasr_emu (the emulation build is off)"
  exit 0
fi
# The emulation build runs under AddressSanitizer; MPI never frees its
# start-up memory, so leaks are not checked (as for the MPI tests under ASan).
export ASAN_OPTIONS=detect_leaks=0
rm -rf "$work"
mkdir -p "$work"
started=$SECONDS
bash "$source_dir/scripts/gpu-bundle.sh" --emulated --build-dir "$build_dir" --no-build \
  --out "$work/gpu-bundle" > "$work/pack.log" 2>&1 ||
  fail "gpu-bundle.sh --emulated failed: $(tail -n 20 "$work/pack.log")"
echo "gpu_rehearsal: packing took $((SECONDS - started)) s; $(du -sh "$work/gpu-bundle" | cut -f1)"

# The GPU machine's python3 holds PyTorch; here Debian's does, which a
# python3 earlier on PATH (pyenv's) may not.
mkdir -p "$work/python"
ln -s /usr/bin/python3 "$work/python/python3"
started=$SECONDS
rc=0
PATH="$source_dir/tests/integration/lib/emulated_gpu:$work/python:$PATH" MPIASR_CHECK_SIZES=rehearsal \
  timeout 600 bash "$work/gpu-bundle/run.sh" "$work/out" > "$work/run.log" 2>&1 || rc=$?
echo "gpu_rehearsal: run.sh took $((SECONDS - started)) s and exited $rc"
[[ -s "$work/out/summary.tsv" ]] || fail "run.sh wrote no summary.tsv: $(tail -n 40 "$work/run.log")"
cat "$work/out/summary.txt"

# Every step's row is PASS, but for these skips.
bad=$(awk -F'\t' 'NR > 1 && $2 != "" && $2 != "PASS" &&
  !($1 == "profile" && $2 == "SKIP" && $5 ~ /^no ncu /) && !($1 ~ /^  [a-z]+\/compile$/ && $2 == "SKIP") {
  print $1 " " $2 ": " $5 }' "$work/out/summary.tsv")
[[ -z "$bad" ]] || fail "rows that did not pass:
$bad"
((rc == 0)) || fail "run.sh exited $rc with every row passing: $(tail -n 20 "$work/run.log")"
grep -q '^device: 0, NVIDIA H200, 144384 MiB' "$work/out/summary.txt" ||
  fail "the table does not name the emulated H200"
for model in medium large; do
  grep -qE "^  $model/eager +.* ms/step; mpiasr [0-9.]+ ms, [0-9.]+ times it; median of " \
    "$work/out/summary.txt" || fail "no row of PyTorch's eager $model step beside mpiasr's"
done
emulated=$(awk -F'\t' '$1 ~ /^(bench_|  )/ && $5 ~ /(TFLOP|GB|audio-s)\/s/ && $5 !~ /^emulated: not a GPU figure/' \
  "$work/out/summary.tsv")
[[ -z "$emulated" ]] || fail "speed figures not marked as emulated:
$emulated"
echo "gpu_rehearsal: all passed"
