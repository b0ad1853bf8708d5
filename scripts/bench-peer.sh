#!/usr/bin/env bash
# mpiasr's CPU training step against PyTorch's, run alternately in one script
# so both see the same machine: model/bench/model_bench's BM_small_step (which
# also measures OpenBLAS's sgemm ceiling in the same process) and
# scripts/pytorch/bench_train_step.py (the same model, batch and step), at 1
# and 2 threads, for a few rounds. Prints each round and the medians: audio
# seconds per second, mpiasr's share of the sgemm ceiling (peak_frac) and the
# ratio mpiasr / PyTorch. Both run with the OpenMP wait settings that
# `mpiasr --version` names (OMP_WAIT_POLICY and GOMP_SPINCOUNT, which the
# mpiasr program sets for itself; PyTorch's libgomp reads them too), and
# model_bench with the OpenBLAS core it names (as the mpiasr program does).
#
#   scripts/bench-peer.sh --python /tmp/torchpeer/bin/python [--rounds 3] [--build DIR]
#
#   --python PY   a Python with PyTorch 2.x, e.g. from
#                 python3 -m venv /tmp/torchpeer && /tmp/torchpeer/bin/pip install torch numpy pyyaml
#   --rounds N    alternations per thread count (default 3)
#   --build DIR   build folder holding model_bench (default build)
# Other processes on the machine skew the figures: the load average is printed
# before and after.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="" rounds=3 build="$root/build"
while (($# > 0)); do
  case "$1" in
    --python) python="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-peer.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -n "$python" ]] || { echo "bench-peer.sh: give --python (a Python with PyTorch 2.x)" >&2; exit 2; }
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench-peer.sh: --rounds '$rounds' is not a positive number" >&2; exit 2; }
for program in model_bench mpiasr; do
  [[ -x "$build/$program" ]] || { echo "bench-peer.sh: no $build/$program (build it first)" >&2; exit 1; }
done
"$python" -c 'import torch, sys; sys.exit(int(torch.__version__.split(".")[0]) < 2)' ||
  { echo "bench-peer.sh: $python has no PyTorch 2.x" >&2; exit 2; }
# Both programs run under the settings the mpiasr program runs with: its
# OpenMP waits (src/main.cpp), and the OpenBLAS core it picks where OpenBLAS
# took the CPU for a generic one (docs/cpu-performance.md, "A CPU newer than
# OpenBLAS"), which model_bench does not pick for itself.
version=$("$build/mpiasr" --version)
export OMP_WAIT_POLICY GOMP_SPINCOUNT
OMP_WAIT_POLICY=$(sed -n 's/^OpenMP: OMP_WAIT_POLICY=\([^,]*\),.*/\1/p' <<<"$version")
GOMP_SPINCOUNT=$(sed -n 's/^OpenMP: .*GOMP_SPINCOUNT=\(.*\)$/\1/p' <<<"$version")
[[ "$OMP_WAIT_POLICY" != unset ]] || unset OMP_WAIT_POLICY
[[ "$GOMP_SPINCOUNT" != unset ]] || unset GOMP_SPINCOUNT
if [[ -z "${OPENBLAS_CORETYPE:-}" ]]; then
  core=$(sed -n 's/^BLAS: .*, core \([A-Za-z0-9]*\)$/\1/p' <<<"$version")
  if [[ -n "$core" ]]; then export OPENBLAS_CORETYPE="$core"; fi
fi
echo "OpenMP: OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}, GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-unset}"

results=$(mktemp)
trap 'rm -f "$results"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((round = 1; round <= rounds; ++round)); do
  for threads in 1 2; do
    line=$("$build/model_bench" --benchmark_filter="BM_small_step/$threads/" --benchmark_min_time=5 \
      --benchmark_format=json | "$python" -c '
import json, sys
report = json.load(sys.stdin)
run = report["benchmarks"][0]
print(report["context"].get("openblas_corename", "?"), run["audio_s/s"], run["peak_frac"], run["sgemm_peak"])')
    read -r corename mpiasr peak_frac sgemm <<<"$line"
    peer=$(OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads "$python" \
      "$root/scripts/pytorch/bench_train_step.py" --threads "$threads" --steps 5)
    torch_speed=$(sed -n 's/.*audio_s_per_s \([0-9.]*\).*/\1/p' <<<"$peer")
    torch_version=$(sed -n 's/.*torch \(.*\)$/\1/p' <<<"$peer")
    echo "$round $threads $mpiasr $peak_frac $sgemm $torch_speed" >>"$results"
    printf 'round %d, %d thread(s): mpiasr %.1f audio-s/s (%.0f%% of sgemm %.0f GFLOP/s, %s),' \
      "$round" "$threads" "$mpiasr" "$(awk -v f="$peak_frac" 'BEGIN { print 100 * f }')" "$sgemm" "$corename"
    printf ' PyTorch %s %.1f audio-s/s: %.2fx\n' "$torch_version" "$torch_speed" \
      "$(awk -v a="$mpiasr" -v b="$torch_speed" 'BEGIN { print a / b }')"
  done
done
"$python" - "$results" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
for threads in ("1", "2"):
    mine = [r for r in rows if r[1] == threads]
    mpiasr = statistics.median(float(r[2]) for r in mine)
    frac = statistics.median(float(r[3]) for r in mine)
    torch = statistics.median(float(r[5]) for r in mine)
    ratios = [float(r[2]) / float(r[5]) for r in mine]
    print(f"median, {threads} thread(s): mpiasr {mpiasr:.1f} audio-s/s at {100 * frac:.0f}% of the "
          f"sgemm ceiling; PyTorch {torch:.1f}; mpiasr / PyTorch {mpiasr / torch:.2f}x "
          f"(rounds {min(ratios):.2f}-{max(ratios):.2f}x)")
EOF
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
