#!/usr/bin/env bash
# Data-parallel scaling of `mpiasr train`: the `small` preset
# (scripts/configs/small.yaml) trained for a few steps in several ways, each
# reported from the trainer's own figures (metrics.jsonl), on this machine's
# cores and on an emulated cluster network (scripts/fake-cluster-net.sh).
#
#   scripts/bench-scaling.sh [--local] [--net N] [--ranks-per-node R] [--rate RATE]
#       [--steps N] [--warmup N] [--threads T] [--build DIR] [--out DIR] [--utterances N]
#
#   --local         this machine, shared memory (the default when --net is not given):
#     mixed 1 rank x T threads, T ranks x 1 thread   the generated corpus
#     equal 1 rank x T threads                       every utterance the same one
#                                                    (about 4 s): no padding, every
#                                                    rank the same work each step
#     equal T ranks x 1 thread                       the buckets as configured (1 MB)
#     equal T ranks x 1 thread, 1 bucket             all-reduced in one piece after
#                                                    backward: no overlap
#     equal T x 1 rank alone                         T single-rank trainings at once:
#                                                    the same cores, no all-reduce
#   --net N         N fake nodes on a network of RATE per link each way (default
#                   1gbit), R ranks of 1 thread per node (default 1), equal work:
#     compute-only   N x R single-rank trainings at once, each in its node's
#                    namespaces: the same cores and loaders, no all-reduce
#     flat           the ring all-reduce over all ranks, 1 MB buckets
#     flat, 1 bucket one all-reduce after backward: no overlap
#     hierarchical   (R > 1) within nodes, ring among node leaders
#     hier., 1 bucket
#   --local and --net may both be given; --net may be given several times
#   (e.g. --net 2 --net 4).
#
# Columns: audio-s/s is audio seconds per second of training step, summed over
# ranks (for "alone" and compute-only runs, over the processes); step ms the
# mean step time (the slowest rank's); wait ms the mean time a step blocked in
# the gradient all-reduce after backward (the all-reduce not hidden, plus any
# wait for a slower rank) and wait% its share of the step; hidden is
# 1 - wait / wait of the same launch with one bucket after backward, the share
# of the all-reduce hidden behind backward; comm cpu ms the CPU time of the
# reducer's communication thread per step; loader cpu ms the loader workers'
# CPU time per step (at SCHED_IDLE). "vs compute" is the step time over the
# compute-only (or alone) step time. The first --warmup steps are left out.
#
#   --steps N       training steps per run (default 30)
#   --warmup N      first steps left out of the figures (default 10; --steps
#                   must be a larger multiple of it)
#   --threads T     --local: cores to use (default 2)
#   --build DIR     build folder holding mpiasr (default build)
#   --out DIR       work folder: corpus, runs, logs (default runs/bench-scaling)
#   --utterances N  corpus size (default 400, made once by scripts/make-corpus.sh)
# Other processes on the machine skew the figures: run it on an idle machine
# (the load average is printed before and after). --net needs root.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
steps=30 warmup=10 build="$root/build" out="$root/runs/bench-scaling" utterances=400 threads=2
local_runs=0 nets=() ranks_per_node=1 rate=1gbit
while (($# > 0)); do
  case "$1" in
    --local) local_runs=1; shift ;;
    --net) nets+=("$2"); shift 2 ;;
    --ranks-per-node) ranks_per_node="$2"; shift 2 ;;
    --rate) rate="$2"; shift 2 ;;
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
((${#nets[@]} > 0)) || local_runs=1
for value in "$steps" "$warmup" "$utterances" "$threads" "$ranks_per_node" ${nets[@]+"${nets[@]}"}; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "bench-scaling.sh: '$value' is not a positive number" >&2; exit 2; }
done
((steps % warmup == 0 && steps > warmup)) ||
  { echo "bench-scaling.sh: --steps $steps must be a multiple of --warmup $warmup, and larger" >&2; exit 2; }
mpiasr="$build/mpiasr"
[[ -x "$mpiasr" ]] || { echo "bench-scaling.sh: no $mpiasr (build it first)" >&2; exit 1; }
if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
((${#nets[@]} == 0 || $(id -u) == 0)) || { echo "bench-scaling.sh: --net needs root" >&2; exit 2; }

mkdir -p "$out"
out="$(cd "$out" && pwd)"
echo "corpus: $utterances utterances in $out/corpus"
bash "$root/scripts/make-corpus.sh" --out "$out/corpus" --utterances "$utterances" --seed 11 \
  --valid-fraction 0.01 --test-fraction 0.01 >"$out/corpus.log"

# The train utterance nearest to 4 s (of the first 50), 400 times.
/usr/bin/python3 - "$out/corpus/train.tsv" >"$out/equal.tsv" <<'EOF'
import os, subprocess, sys
manifest = sys.argv[1]
lines = open(manifest).readlines()[:50]
files = [os.path.join(os.path.dirname(manifest), line.split("\t")[0]) for line in lines]
seconds = subprocess.run(["soxi", "-D", *files], check=True, capture_output=True, text=True)
durations = [float(value) for value in seconds.stdout.split()]
best = min(range(len(files)), key=lambda i: abs(durations[i] - 4.0))
sys.stdout.write((files[best] + "\t" + lines[best].split("\t", 1)[1]) * 400)
EOF

# The small preset as configured, with batches fixed here (dynamic, 60 s per
# rank counting padding: 15 utterances of the equal corpus); no validation,
# one checkpoint at the end.
common=("$root/scripts/configs/small.yaml" --data.valid_manifest= --batching.mode=dynamic
  --batching.max_batch_seconds=60 --batching.max_batch_utterances=16
  --training.max_steps="$steps" --training.epochs=1000 --training.log_every="$warmup"
  --validation.every_steps=0 --checkpoint.every_steps=0 --checkpoint.resume=never)
one_bucket=(--distributed.bucket_mb=4096 --distributed.first_bucket_mb=4096)
results="$out/results.jsonl"
: >"$results"

# record NAME GROUP KIND RANKS THREADS DIR...: appends the figures of the
# runs in DIR... (one for an MPI job, several for processes run at once).
record() {
  /usr/bin/python3 - "$warmup" "$results" "$@" <<'EOF'
import json, sys
warmup, results, name, group, kind, ranks, threads, *dirs = sys.argv[1:]
def timed(path):
    records = [json.loads(line) for line in open(path) if '"train"' in line]
    return [r for r in records if r["step"] > int(warmup)]
def mean(values):
    return sum(values) / len(values) if values else None
runs = [timed(f"{d}/metrics.jsonl") for d in dirs]
row = {"name": name, "group": group, "kind": kind, "ranks": int(ranks), "threads": int(threads),
       "audio_s_per_s": sum(mean([r["audio_s_per_s"] for r in run]) for run in runs),
       "step_ms": mean([mean([r["step_ms"] for r in run]) for run in runs]),
       "loader_cpu_ms": mean([mean([r["loader_cpu_ms"] for r in run]) for run in runs])}
for key in ("comm_wait_ms", "comm_cpu_ms"):
    values = [r[key] for run in runs for r in run if key in r]
    row[key] = mean(values)
open(results, "a").write(json.dumps(row) + "\n")
EOF
}

# train NAME GROUP KIND RANKS THREADS LAUNCHER... -- OVERRIDES...: one training.
train() {
  local name="$1" group="$2" kind="$3" ranks="$4" threads_per_rank="$5"
  shift 5
  local launcher=()
  while [[ "$1" != -- ]]; do launcher+=("$1"); shift; done
  shift
  rm -rf "${out:?}/$name"
  echo "  $name" >&2
  if ! timeout 3600 ${launcher[@]+"${launcher[@]}"} "$mpiasr" train "${common[@]}" \
    --output.dir="$out/$name" --training.threads="$threads_per_rank" "$@" >"$out/$name.log" 2>&1; then
    tail -n 20 "$out/$name.log" >&2
    echo "bench-scaling.sh: the run $name failed (log $out/$name.log)" >&2
    exit 1
  fi
  record "$name" "$group" "$kind" "$ranks" "$threads_per_rank" "$out/$name"
}

# alone NAME GROUP COUNT ENTER -- OVERRIDES...: COUNT single-rank trainings at
# once, process k started by ENTER k (a command prefix, e.g. one that enters
# fake node k's namespaces), each with 1 thread.
alone() {
  local name="$1" group="$2" count="$3" enter="$4"
  shift 5
  local pids=() dirs=() k
  echo "  $name" >&2
  for ((k = 1; k <= count; ++k)); do
    rm -rf "${out:?}/$name-$k"
    dirs+=("$out/$name-$k")
    # shellcheck disable=SC2086  # ENTER is a command prefix
    $enter $k "$mpiasr" train "${common[@]}" --output.dir="$out/$name-$k" --training.threads=1 \
      "$@" >"$out/$name-$k.log" 2>&1 &
    pids+=($!)
  done
  for k in "${!pids[@]}"; do
    wait "${pids[$k]}" || { tail -n 20 "${dirs[$k]}.log" >&2; echo "bench-scaling.sh: $name failed" >&2; exit 1; }
  done
  record "$name" "$group" alone "$count" 1 "${dirs[@]}"
}

run_here() { shift; "$@"; }  # the ENTER of processes on this machine

echo "small preset, $steps steps per run (figures from steps $((warmup + 1))-$steps);" \
  "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
if ((local_runs)); then
  group="this machine ($(nproc) cores, shared memory)"
  train "mixed-1x$threads" "$group" mixed-threads 1 "$threads" -- \
    --data.train_manifest="$out/corpus/train.tsv"
  train "mixed-${threads}x1" "$group" mixed-ranks "$threads" 1 mpirun -np "$threads" --oversubscribe -- \
    --data.train_manifest="$out/corpus/train.tsv"
  train "equal-1x$threads" "$group" threads 1 "$threads" -- --data.train_manifest="$out/equal.tsv"
  train "equal-${threads}x1" "$group" flat "$threads" 1 mpirun -np "$threads" --oversubscribe -- \
    --data.train_manifest="$out/equal.tsv"
  train "equal-${threads}x1-1bucket" "$group" flat-1bucket "$threads" 1 \
    mpirun -np "$threads" --oversubscribe -- --data.train_manifest="$out/equal.tsv" "${one_bucket[@]}"
  alone "equal-${threads}x1-alone" "$group" "$threads" run_here -- --data.train_manifest="$out/equal.tsv"
fi

for nodes in ${nets[@]+"${nets[@]}"}; do
  net="mpiasr-bench"
  ranks=$((nodes * ranks_per_node))
  bash "$root/scripts/fake-cluster-net.sh" start "$nodes" --rate "$rate" --name "$net" >"$out/net.log"
  trap 'bash "$root/scripts/fake-cluster-net.sh" stop --name mpiasr-bench' EXIT
  group="$nodes fake nodes x $ranks_per_node ranks, $rate links (tbf, no added delay)"
  disks="$out/nodes-$nodes"
  fake=("$root/scripts/mpirun-fake-nodes.sh" --nodes "$nodes" --ranks-per-node "$ranks_per_node"
    --nodes-root "$disks" --node-disk "$out/node-disk" --net "$net")
  # enter-node.sh K COMMAND: process K of the compute-only run on its fake
  # node (ranks of node k are numbered (k - 1) R + 1 .. k R).
  enter="$out/enter-node.sh"
  cat >"$enter" <<EOF
#!/usr/bin/env bash
# enter-node.sh K COMMAND...: COMMAND in fake node K's network namespace and hostname.
node=\$(( (\$1 - 1) / $ranks_per_node + 1 ))
shift
exec nsenter "--net=/run/netns/$net-node\$node" unshare --uts bash -c 'hostname "\$0" && exec "\$@"' "node\$node" "\$@"
EOF
  chmod +x "$enter"
  tag="net$nodes-x$ranks_per_node"
  alone "$tag-compute" "$group" "$ranks" "$enter" -- --data.train_manifest="$out/equal.tsv"
  train "$tag-flat" "$group" flat "$ranks" 1 "${fake[@]}" -- --data.train_manifest="$out/equal.tsv"
  train "$tag-flat-1bucket" "$group" flat-1bucket "$ranks" 1 "${fake[@]}" -- \
    --data.train_manifest="$out/equal.tsv" "${one_bucket[@]}"
  if ((ranks_per_node > 1)); then
    train "$tag-hier" "$group" hierarchical "$ranks" 1 "${fake[@]}" -- \
      --data.train_manifest="$out/equal.tsv" --distributed.hierarchical=true
    train "$tag-hier-1bucket" "$group" hierarchical-1bucket "$ranks" 1 "${fake[@]}" -- \
      --data.train_manifest="$out/equal.tsv" --distributed.hierarchical=true "${one_bucket[@]}"
  fi
  bash "$root/scripts/fake-cluster-net.sh" stop --name "$net"
  trap - EXIT
done

# The table, with each run's hidden share and step time against compute only.
/usr/bin/python3 - "$results" <<'EOF' | tee "$out/table.txt"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def fmt(value, spec):
    return format(value, spec) if value is not None else "-"
print(f"{'run':<26} {'ranks':>5} {'thr':>3} {'audio-s/s':>9} {'step ms':>8} {'wait ms':>8} "
      f"{'wait%':>6} {'hidden':>6} {'vs compute':>10} {'comm cpu':>8} {'loader cpu':>10}")
group = None
for row in rows:
    if row["group"] != group:
        group = row["group"]
        print(f"-- {group}")
    same = [r for r in rows if r["group"] == group]
    whole = next((r for r in same if r["kind"] == row["kind"] + "-1bucket"), None)
    hidden = None
    if whole and row["kind"] in ("flat", "hierarchical") and whole["comm_wait_ms"]:
        hidden = 100 * (1 - row["comm_wait_ms"] / whole["comm_wait_ms"])
    alone = next((r for r in same if r["kind"] == "alone"), None)
    versus = None
    if alone and row["kind"].startswith(("flat", "hierarchical")):
        versus = row["step_ms"] / alone["step_ms"]
    wait_share = (100 * row["comm_wait_ms"] / row["step_ms"]
                  if row["comm_wait_ms"] is not None else None)
    print(f"{row['name']:<26} {row['ranks']:>5} {row['threads']:>3} {row['audio_s_per_s']:9.1f} "
          f"{row['step_ms']:8.0f} {fmt(row['comm_wait_ms'], '8.1f'):>8} {fmt(wait_share, '5.1f'):>6} "
          f"{fmt(hidden, '5.0f'):>5}% {fmt(versus, '9.3f'):>10} {fmt(row['comm_cpu_ms'], '8.1f'):>8} "
          f"{fmt(row['loader_cpu_ms'], '10.1f'):>10}")
def speed(kind):
    return next((r["audio_s_per_s"] for r in rows if r["kind"] == kind), None)
for label, ranks, threads in (("equal work", "flat", "threads"),
                              ("generated corpus", "mixed-ranks", "mixed-threads")):
    if speed(ranks) and speed(threads):
        print(f"this machine, {label}: ranks x 1 thread run at {speed(ranks) / speed(threads):.2f}x "
              f"the speed of 1 rank x threads")
EOF
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); logs and metrics in $out"
