#!/usr/bin/env bash
# Data-parallel scaling of `mpiasr train` on this machine's cores: the `small`
# preset (scripts/configs/small.yaml) trained for a few steps in six ways,
# each reporting the trainer's own figures:
#
#   mixed   1 rank  x T threads   the generated corpus; one process, T GEMM threads
#   mixed   T ranks x 1 thread    the same cores as T MPI ranks (batch per rank)
#   equal   1 rank  x T threads   every utterance the same one (of about 4 s): no
#                                 padding, and every rank has the same work at every step
#   equal   T ranks x 1 thread    the same, buckets as configured (distributed.bucket_mb
#                                 25, first_bucket_mb 1: 2 buckets for small's 14 MB)
#   equal   T ranks x 1 thread, 2 MB buckets: 8 buckets, more of them start during backward
#   equal   T ranks x 1 thread, one bucket: gradients all-reduced in one piece
#                                 after backward (distributed.bucket_mb and
#                                 first_bucket_mb above the model's size): no overlap
#
# Throughput is audio seconds per second of training step, summed over ranks
# (the progress line's audio-s/s; the first --warmup steps are left out). The
# trainer's "comm wait" is how long each step blocked in the gradient
# all-reduce after backward, mean over ranks: the all-reduce that backward did
# not hide, plus the time spent waiting for a slower rank. Equal work per rank
# shrinks the second part (what remains is noise: loader threads, the OS, other
# processes), and the share of the all-reduce hidden behind backward is
#   1 - wait(buckets during backward) / wait(one bucket after backward).
#
#   scripts/bench-scaling.sh [--steps N] [--warmup N] [--build DIR] [--out DIR]
#       [--utterances N] [--threads T]
#
#   --steps N       training steps per run (default 30)
#   --warmup N      first steps left out of the figures (default 10; --steps
#                   must be a larger multiple of it)
#   --build DIR     build folder holding mpiasr (default build)
#   --out DIR       work folder: corpus, runs, logs (default runs/bench-scaling)
#   --utterances N  corpus size (default 400, made once by scripts/make-corpus.sh)
#   --threads T     cores to use: T threads for 1 rank, T ranks x 1 thread (default 2)
# Other processes on the machine skew the figures: run it on an idle machine.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
steps=30 warmup=10 build="$root/build" out="$root/runs/bench-scaling" utterances=400 threads=2
while (($# > 0)); do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --utterances) utterances="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-scaling.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for value in "$steps" "$warmup" "$utterances" "$threads"; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "bench-scaling.sh: '$value' is not a positive number" >&2; exit 2; }
done
((steps % warmup == 0 && steps > warmup)) ||
  { echo "bench-scaling.sh: --steps $steps must be a multiple of --warmup $warmup, and larger" >&2; exit 2; }
mpiasr="$build/mpiasr"
[[ -x "$mpiasr" ]] || { echo "bench-scaling.sh: no $mpiasr (build it first)" >&2; exit 1; }
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

mkdir -p "$out"
out="$(cd "$out" && pwd)"
echo "corpus: $utterances utterances in $out/corpus"
bash "$root/scripts/make-corpus.sh" --out "$out/corpus" --utterances "$utterances" --seed 11 \
  --valid-fraction 0.01 --test-fraction 0.01 >"$out/corpus.log"

# The train utterance nearest to 4 s (of the first 50), 200 times.
/usr/bin/python3 - "$out/corpus/train.tsv" >"$out/equal.tsv" <<'EOF'
import os, subprocess, sys
manifest = sys.argv[1]
lines = open(manifest).readlines()[:50]
files = [os.path.join(os.path.dirname(manifest), line.split("\t")[0]) for line in lines]
seconds = subprocess.run(["soxi", "-D", *files], check=True, capture_output=True, text=True)
durations = [float(value) for value in seconds.stdout.split()]
best = min(range(len(files)), key=lambda i: abs(durations[i] - 4.0))
sys.stdout.write((files[best] + "\t" + lines[best].split("\t", 1)[1]) * 200)
EOF

# The small preset as configured, with batches fixed here (dynamic, 60 s per
# rank counting padding); no validation, one checkpoint at the end.
common=("$root/scripts/configs/small.yaml" --data.valid_manifest= --batching.mode=dynamic
  --batching.max_batch_seconds=60 --batching.max_batch_utterances=16
  --training.max_steps="$steps" --training.epochs=1000 --training.log_every="$warmup"
  --validation.every_steps=0 --checkpoint.every_steps=0 --checkpoint.resume=never)

# run NAME MANIFEST RANKS THREADS [OVERRIDES...]: trains; prints one row of the table.
run() {
  local name="$1" manifest="$2" ranks="$3" threads_per_rank="$4"
  shift 4
  local launcher=()
  ((ranks == 1)) || launcher=(mpirun -np "$ranks" --oversubscribe)
  rm -rf "${out:?}/$name"
  if ! timeout 3600 "${launcher[@]}" "$mpiasr" train "${common[@]}" --output.dir="$out/$name" \
    --data.train_manifest="$manifest" --training.threads="$threads_per_rank" "$@" \
    >"$out/$name.log" 2>&1; then
    tail -n 20 "$out/$name.log" >&2
    echo "bench-scaling.sh: the run $name failed (log $out/$name.log)" >&2
    exit 1
  fi
  /usr/bin/python3 - "$out/$name/metrics.jsonl" "$warmup" "$ranks" "$threads_per_rank" \
    "$name" <<'EOF'
import json, sys
path, warmup, ranks, threads, name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
records = [json.loads(line) for line in open(path) if '"train"' in line]
timed = [r for r in records if r["step"] > warmup]
audio_s_per_s = sum(r["audio_s_per_s"] for r in timed) / len(timed)
wait = [r["comm_wait_ms"] for r in timed if "comm_wait_ms" in r]
wait_ms = f"{sum(wait) / len(wait):8.1f}" if wait else "       -"
print(f"{name:<24} {ranks:>5} {threads:>7} {audio_s_per_s:10.1f} {wait_ms}")
EOF
}

echo "small preset, $steps steps per run (figures from steps $((warmup + 1))-$steps);" \
  "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-24s %5s %7s %10s %8s\n' run ranks threads audio-s/s "wait ms"
{
  run "mixed-1rank-${threads}threads" "$out/corpus/train.tsv" 1 "$threads"
  run "mixed-${threads}ranks" "$out/corpus/train.tsv" "$threads" 1
  run "equal-1rank-${threads}threads" "$out/equal.tsv" 1 "$threads"
  run "equal-${threads}ranks" "$out/equal.tsv" "$threads" 1
  run "equal-${threads}ranks-2mb" "$out/equal.tsv" "$threads" 1 --distributed.bucket_mb=2
  run "equal-${threads}ranks-1bucket" "$out/equal.tsv" "$threads" 1 \
    --distributed.bucket_mb=4096 --distributed.first_bucket_mb=4096
} | tee "$out/table.txt"
grep -m1 '^backend:' "$out/mixed-1rank-${threads}threads.log" | sed 's/^/1 rank: /' || true
grep -m1 '^model: .*M parameters' "$out/mixed-1rank-${threads}threads.log" || true
awk -v t="$threads" 'NR == 1 { single = $4 } NR == 2 { ranks = $4 } NR == 3 { equal_single = $4 }
  NR == 4 { configured = $5; equal_ranks = $4 } NR == 5 { small = $5; equal_small = $4 }
  NR == 6 { whole = $5 }
  END {
    printf "speed-up of %d ranks x 1 thread over 1 rank x %d threads: %.2fx mixed; equal work " \
      "%.2fx (%.2fx with 2 MB buckets)\n", t, t, ranks / single, equal_ranks / equal_single,
      equal_small / equal_single
    printf "all-reduce hidden behind backward (equal work; wait %.1f ms/step in one piece after " \
      "backward): %.0f%% with the configured buckets (wait %.1f ms/step), %.0f%% with 2 MB " \
      "buckets (%.1f ms/step)\n", whole, 100 * (1 - configured / whole), configured,
      100 * (1 - small / whole), small
  }' "$out/table.txt"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); logs and metrics in $out"
