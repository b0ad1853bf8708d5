#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU (and the CUDA toolkit in
# /usr/local/cuda): installs the Debian dependencies, builds the CUDA targets
# in Release for this GPU's architecture, runs every GPU test (each CUDA op
# against the CPU backend, a training step of `tiny` on GPU vs CPU, NCCL under
# mpirun with one rank per GPU, the mpiasr program training `tiny` on the GPU
# from a generated corpus), the CUDA microbenchmarks, and a 60-second
# training throughput run of `medium` in fp16-mixed on synthetic batches; then
# prints one summary table. Budget: under 8 minutes on one H200.
# Usage: scripts/gpu-check.sh [build-dir]   (default: build-gpu)
# Environment: TRAIN_SECONDS (default 60) for the throughput run.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(mkdir -p "${1:-$root/build-gpu}" && cd "${1:-$root/build-gpu}" && pwd)"
out="$build/gpu-check"
mkdir -p "$out"
start=$(date +%s)
failures=0
note() { echo "gpu-check [$(($(date +%s) - start)) s]: $*"; }

if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
  echo "gpu-check: no NVIDIA GPU here (nvidia-smi missing or lists none)"
  exit 1
fi
nvidia-smi -L

note "dependencies"
bash "$root/scripts/install-deps.sh" || exit 1

# Compile for this GPU only (e.g. 90 on an H100/H200): half the nvcc time of "80;90".
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -1 | tr -d '. ')
arch_flag=()
[[ "$arch" =~ ^[0-9]+$ ]] && arch_flag=(-DCMAKE_CUDA_ARCHITECTURES="$arch")
note "configure (CUDA architecture ${arch:-default})"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release "${arch_flag[@]}" > "$out/configure.log" ||
  { cat "$out/configure.log"; exit 1; }
grep -q "CUDA backend ON" "$out/configure.log" ||
  { echo "gpu-check: CMake found no CUDA compiler"; cat "$out/configure.log"; exit 1; }

tests=(offset_allocator_test cuda_kernels_test cuda_training_test nccl_test)
benches=(cuda_ops_bench cuda_train_bench)
note "build mpiasr ${tests[*]} ${benches[*]}"
cmake --build "$build" -j "$(nproc)" --target mpiasr "${tests[@]}" "${benches[@]}" \
  > "$out/build.log" 2>&1 ||
  { tail -50 "$out/build.log"; exit 1; }

for test in "${tests[@]}"; do
  note "$test"
  if ! "$build/$test" --gtest_output="json:$out/$test.json" > "$out/$test.log" 2>&1; then
    failures=$((failures + 1))
    grep -E "Failure|FAILED|error" "$out/$test.log" | head -20
  fi
done

# Integration scripts: PASS, FAIL or SKIP (printed by the script when it cannot run).
integration() {
  local name=$1 status=PASS
  note "$name"
  bash "$root/tests/integration/$name.sh" "$build" "$root" > "$out/$name.log" 2>&1 ||
    { status=FAIL; tail -30 "$out/$name.log"; }
  grep -q "^SKIP" "$out/$name.log" && status=SKIP
  echo "$status" > "$out/$name.status"
}
integration nccl_gpus
integration train_gpu

note "cuda_ops_bench"
"$build/cuda_ops_bench" --benchmark_min_time=0.2 --benchmark_out="$out/ops.json" \
  --benchmark_out_format=json > "$out/ops.log" 2>&1 ||
  { failures=$((failures + 1)); tail -20 "$out/ops.log"; }

note "cuda_train_bench (${TRAIN_SECONDS:-60} s of medium, fp16-mixed)"
"$build/cuda_train_bench" --preset=medium --seconds="${TRAIN_SECONDS:-60}" \
  --benchmark_out="$out/train.json" --benchmark_out_format=json > "$out/train.log" 2>&1 ||
  { failures=$((failures + 1)); tail -20 "$out/train.log"; }

elapsed=$(($(date +%s) - start))
summary_status=0
python3 - "$out" "$elapsed" "${tests[@]}" << 'PY' || summary_status=1
import json, os, sys

out, elapsed, tests = sys.argv[1], sys.argv[2], sys.argv[3:]

def load(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)

rows = []
for test in tests:
    report = load(test + ".json")
    if report is None:
        rows.append((test, "did not run", ""))
        continue
    cases = [c for s in report.get("testsuites", []) for c in s.get("testsuite", [])]
    failed = sum(1 for c in cases if c.get("failures"))
    skipped = sum(1 for c in cases if c.get("result") == "SKIPPED")
    passed = len(cases) - failed - skipped
    status = "FAIL" if failed else ("SKIP" if skipped else "PASS")
    rows.append((test, status, f"{passed} passed, {failed} failed, {skipped} skipped"))
for name, details in [("nccl_gpus", "NCCL under mpirun, 1 rank per GPU"),
                      ("train_gpu", "mpiasr train tiny on the GPU, resume, eval")]:
    path = os.path.join(out, name + ".status")
    status = open(path).read().strip() if os.path.exists(path) else "did not run"
    rows.append((name, status, details))

print()
print("=" * 78)
print(f"{'check':40} {'status':8} details")
print("-" * 78)
for name, status, details in rows:
    print(f"{name:40} {status:8} {details}")

ops = load("ops.json")
if ops:
    print("-" * 78)
    print(f"{'cuda_ops_bench (medium, 32 x 15 s)':40} {'time':>10} {'rate':>16} {'of peak':>9}")
    for b in ops.get("benchmarks", []):
        if "TFLOP/s" in b:
            rate = f"{b['TFLOP/s']:.1f} TFLOP/s"
        elif "GB/s" in b:
            rate = f"{b['GB/s']:.0f} GB/s"
        else:
            rate = ""
        frac = f"{100 * b['peak_frac']:.0f}%" if "peak_frac" in b else ""
        print(f"{b['name']:40} {b['real_time']:8.1f} us {rate:>16} {frac:>9}")
    context = ops.get("context", {})
    print(f"peaks: {context.get('device', '?')}: {float(context.get('peak_fp16_tflops', 0)):.0f} "
          f"fp16 TFLOP/s, {float(context.get('peak_memory_gbps', 0)):.0f} GB/s")

train = load("train.json")
if train:
    print("-" * 78)
    for b in train.get("benchmarks", []):
        print(f"{b['name']:40} {b['real_time']:8.1f} ms/step  {b.get('label', '')}")
        print(f"{'  audio seconds per second':40} {b.get('audio_s/s', 0):10.0f}")
        print(f"{'  model TFLOP/s (analytic)':40} {b.get('TFLOP/s', 0):10.1f}")
        if "MFU" in b:
            print(f"{'  model FLOP utilization':40} {100 * b['MFU']:9.1f}%")
        print(f"{'  steps skipped by the loss scaler':40} {b.get('skipped_steps', 0):10.0f}")
print("-" * 78)
print(f"total {elapsed} s; logs in {out}")
print("=" * 78)
# On a GPU machine a skipped GPU test means the device could not be used.
sys.exit(1 if any(status != "PASS" for _, status, _ in rows) else 0)
PY

if ((failures > 0 || summary_status != 0)); then
  echo "gpu-check: failed (see the table and the logs)"
  exit 1
fi
echo "gpu-check: all passed"
