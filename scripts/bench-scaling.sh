#!/usr/bin/env bash
# Data-parallel scaling of `mpiasr train`: the `small` preset
# (scripts/configs/small.yaml) trained for a few steps in several ways, each
# reported from the trainer's own figures (metrics.jsonl), on this machine's
# cores and on an emulated cluster network (scripts/fake-cluster-net.sh).
#
#   scripts/bench-scaling.sh [--local] [--net N[xR]]... [--rounds K] [--rate RATE]...
#       [--steps N] [--warmup N] [--threads T] [--build DIR] [--out DIR] [--utterances N]
#       [--validate [--bucket-mb B]...]
#
# The table of docs/scaling.md is this, on an otherwise idle machine:
#   scripts/bench-scaling.sh --local --net 2x1 --net 2x2 --net 4x1 --rounds 3
# and its validation of the step model (scripts/step-model.py) this:
#   scripts/bench-scaling.sh --validate --net 2x1 --net 2x2 --net 4x1 \
#       --rate 100mbit --rate 1gbit --rate 10gbit --bucket-mb 1 --bucket-mb 4
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
#   --net NxR       N fake nodes on a network of RATE per link each way (default
#                   1gbit), R ranks of 1 thread per node (default 1), equal work:
#     compute-only   N x R single-rank trainings at once, each in its node's
#                    namespaces: the same cores and loaders, no all-reduce
#     flat           the ring all-reduce over all ranks, 1 MB buckets
#     flat, 1 bucket one all-reduce after backward: no overlap
#     flat-bf16      the ring with bf16 messages (distributed.allreduce_dtype):
#                    half the bytes; and its 1-bucket run
#     hierarchical   (R > 1) within nodes, ring among node leaders
#     hier., 1 bucket
#   --local and --net may both be given; --net may be given several times
#   (e.g. --net 2x2 --net 4x1), and --rate too: each network at each rate.
#   --validate      instead of the runs above, on each network: its link
#                   measured (scripts/net-transfer.py, node1 to node2), then
#                   for each --bucket-mb (default 1 and 4) the flat ring and
#                   (R > 1) the hierarchical all-reduce, each with the step's
#                   timeline recorded (output.timeline); the step model, fed
#                   the run's timeline and the measured link, predicts the
#                   run's step time and exposed all-reduce, against what the
#                   run measured: OUT/validation.md.
#   --rounds K      run the whole list K times, in turn (default 1), so every
#                   configuration sees the same load: each figure is the median
#                   over the rounds, and each ratio (hidden, vs compute, ranks
#                   against threads) is taken within a round, then the median
#                   and the range over the rounds are printed.
#
# Columns: audio-s/s is audio seconds per second of training step, summed over
# ranks (for "alone" and compute-only runs, over the processes); step ms the
# mean step time (the slowest rank's); wait ms the mean time a step blocked in
# the gradient all-reduce after backward (the all-reduce not hidden, plus any
# wait for a slower rank), mean over ranks, and wait% its share of the step;
# exposed ms the all-reduce left after the last rank's backward (per step the
# least wait of any rank: the last rank to finish backward waits for no other);
# hidden is 1 - exposed / exposed of the same launch with one bucket after
# backward, the share of the all-reduce hidden behind backward, free of the
# waits for a slower rank that this 2-core machine's uneven cores cause (they
# stay in wait ms and in the step time); comm cpu ms the CPU time of the
# reducer's communication thread per step; loader cpu ms the loader workers'
# CPU time per step (at SCHED_IDLE); kernel% and idle% the shares of the
# whole machine's CPU time, over the whole run (start-up included), spent in
# the kernel (system, irq, softirq: on the emulated network, TCP through the
# veth pairs, which real nodes would spend on their own cores) and idle
# (cores with nothing to run: ranks asleep waiting for a slower one);
# ctxt/s the machine's context switches a second over the run (every wake of
# a sleeping thread, e.g. each poll of a communication thread, costs two).
# "vs compute" is the step time over the compute-only (or alone) step time.
# The first --warmup steps are left out.
# The table goes to OUT/table.txt, and as Markdown, with the conditions (date,
# CPU, load average, steps, rounds, link rate), to OUT/table.md.
#
#   --steps N       training steps per run (default 30)
#   --warmup N      first steps left out of the figures (default 10; --steps
#                   must be a larger multiple of it)
#   --threads T     --local: cores to use (default 2)
#   --build DIR     build folder holding mpiasr (default build)
#   --out DIR       work folder: corpus, runs, logs (default runs/bench-scaling)
#   --utterances N  corpus size (default 400, made once by scripts/make-corpus.sh)
# Other processes on the machine skew the figures: run it on an idle machine
# (the load average is printed before and after, and goes into table.md).
# --net needs root.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
steps=30 warmup=10 build="$root/build" out="$root/runs/bench-scaling" utterances=400 threads=2
local_runs=0 nets=() rounds=1 rates=() validate=0 validate_buckets=()
while (($# > 0)); do
  case "$1" in
    --local) local_runs=1; shift ;;
    --net) nets+=("$2"); shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --rate) rates+=("$2"); shift 2 ;;
    --validate) validate=1; shift ;;
    --bucket-mb) validate_buckets+=("$2"); shift 2 ;;
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
((${#rates[@]} > 0)) || rates=(1gbit)
((${#validate_buckets[@]} > 0)) || validate_buckets=(1 4)
((!validate || ${#nets[@]} > 0)) || { echo "bench-scaling.sh: --validate needs --net" >&2; exit 2; }
for value in "$steps" "$warmup" "$utterances" "$threads" "$rounds"; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || { echo "bench-scaling.sh: '$value' is not a positive number" >&2; exit 2; }
done
for spec in ${nets[@]+"${nets[@]}"}; do
  [[ "$spec" =~ ^[1-9][0-9]*(x[1-9][0-9]*)?$ ]] ||
    { echo "bench-scaling.sh: --net '$spec': give N or NxR (nodes x ranks per node)" >&2; exit 2; }
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
validation="$out/validation.jsonl"
: >"$results"
: >"$validation"

# machine_counters: the machine's "cpu" line of /proc/stat, its count of
# context switches (ctxt) and the time, on one line.
machine_counters() { echo "$(head -n 1 /proc/stat) $(grep '^ctxt ' /proc/stat) $(date +%s.%N)"; }

# record NAME GROUP KIND RANKS THREADS COUNTERS_BEFORE DIR...: appends the
# figures of the runs in DIR... (one for an MPI job, several for processes
# run at once), just ended; COUNTERS_BEFORE is machine_counters from before
# they started.
record() {
  local after
  after=$(machine_counters)
  /usr/bin/python3 - "$warmup" "$results" "$round" "$after" "$@" <<'EOF'
import json, sys
warmup, results, round_, after, name, group, kind, ranks, threads, before, *dirs = sys.argv[1:]
def counters(line):
    fields = line.split()
    return [int(v) for v in fields[1:9]], int(fields[fields.index("ctxt") + 1]), float(fields[-1])
(cpu_before, ctxt_before, t_before), (cpu_after, ctxt_after, t_after) = map(counters, (before, after))
# user nice system idle iowait irq softirq steal: the machine's CPU time during the runs
spent = [b - a for a, b in zip(cpu_before, cpu_after)]
user, nice, system, idle, iowait, irq, softirq, steal = spent
def timed(path):
    records = [json.loads(line) for line in open(path) if '"train"' in line]
    return [r for r in records if r["step"] > int(warmup)]
def mean(values):
    return sum(values) / len(values) if values else None
runs = [timed(f"{d}/metrics.jsonl") for d in dirs]
row = {"round": int(round_), "name": name, "group": group, "kind": kind, "ranks": int(ranks),
       "threads": int(threads),
       "audio_s_per_s": sum(mean([r["audio_s_per_s"] for r in run]) for run in runs),
       "step_ms": mean([mean([r["step_ms"] for r in run]) for run in runs]),
       "loader_cpu_ms": mean([mean([r["loader_cpu_ms"] for r in run]) for run in runs]),
       "kernel_pct": 100 * (system + irq + softirq) / sum(spent),
       "idle_pct": 100 * (idle + iowait) / sum(spent),
       "ctxt_per_s": (ctxt_after - ctxt_before) / (t_after - t_before)}
for key in ("comm_wait_ms", "comm_exposed_ms", "comm_cpu_ms"):
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
  echo "  round $round: $name" >&2
  local before
  before=$(machine_counters)
  if ! timeout 3600 ${launcher[@]+"${launcher[@]}"} "$mpiasr" train "${common[@]}" \
    --output.dir="$out/$name" --training.threads="$threads_per_rank" "$@" >"$out/$name.log" 2>&1; then
    tail -n 20 "$out/$name.log" >&2
    echo "bench-scaling.sh: the run $name failed (log $out/$name.log)" >&2
    exit 1
  fi
  record "$name" "$group" "$kind" "$ranks" "$threads_per_rank" "$before" "$out/$name"
}

# alone NAME GROUP COUNT ENTER -- OVERRIDES...: COUNT single-rank trainings at
# once, process k started by ENTER k (a command prefix, e.g. one that enters
# fake node k's namespaces), each with 1 thread.
alone() {
  local name="$1" group="$2" count="$3" enter="$4"
  shift 5
  local pids=() dirs=() k before
  echo "  round $round: $name" >&2
  before=$(machine_counters)
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
  record "$name" "$group" alone "$count" 1 "$before" "${dirs[@]}"
}

run_here() { shift; "$@"; }  # the ENTER of processes on this machine

# local_round: the runs on this machine's cores.
local_round() {
  local group
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
}

# net_round N R: the runs on N fake nodes of R ranks each, on a network
# started for them and stopped after.
net="mpiasr-bench"
stop_net() { bash "$root/scripts/fake-cluster-net.sh" stop --name "$net"; }
net_round() {
  local nodes="$1" ranks_per_node="$2"
  local ranks=$((nodes * ranks_per_node)) tag="net$1x$2"
  ((${#rates[@]} == 1)) || tag+="-$rate"
  local group="$nodes fake nodes x $ranks_per_node ranks, $rate links (tbf, no added delay)"
  trap stop_net EXIT
  bash "$root/scripts/fake-cluster-net.sh" start "$nodes" --rate "$rate" --name "$net" >"$out/net.log"
  local fake=("$root/scripts/mpirun-fake-nodes.sh" --nodes "$nodes" --ranks-per-node "$ranks_per_node"
    --nodes-root "$out/nodes-$tag" --node-disk "$out/node-disk" --net "$net")
  # enter-node.sh K COMMAND: process K of the compute-only run on its fake
  # node (ranks of node k are numbered (k - 1) R + 1 .. k R).
  local enter="$out/enter-$tag.sh"
  cat >"$enter" <<EOF
#!/usr/bin/env bash
# enter-$tag.sh K COMMAND...: COMMAND in fake node K's network namespace and hostname.
node=\$(( (\$1 - 1) / $ranks_per_node + 1 ))
shift
exec nsenter "--net=/run/netns/$net-node\$node" unshare --uts bash -c 'hostname "\$0" && exec "\$@"' "node\$node" "\$@"
EOF
  chmod +x "$enter"
  if ((validate)); then
    validate_round "$nodes" "$ranks_per_node" "$tag" "$group" "${fake[@]}"
    stop_net
    trap - EXIT
    return
  fi
  alone "$tag-compute" "$group" "$ranks" "$enter" -- --data.train_manifest="$out/equal.tsv"
  train "$tag-flat" "$group" flat "$ranks" 1 "${fake[@]}" -- --data.train_manifest="$out/equal.tsv"
  train "$tag-flat-1bucket" "$group" flat-1bucket "$ranks" 1 "${fake[@]}" -- \
    --data.train_manifest="$out/equal.tsv" "${one_bucket[@]}"
  train "$tag-flat-bf16" "$group" flat-bf16 "$ranks" 1 "${fake[@]}" -- \
    --data.train_manifest="$out/equal.tsv" --distributed.allreduce_dtype=bf16
  train "$tag-flat-bf16-1bucket" "$group" flat-bf16-1bucket "$ranks" 1 "${fake[@]}" -- \
    --data.train_manifest="$out/equal.tsv" --distributed.allreduce_dtype=bf16 "${one_bucket[@]}"
  if ((ranks_per_node > 1)); then
    train "$tag-hier" "$group" hierarchical "$ranks" 1 "${fake[@]}" -- \
      --data.train_manifest="$out/equal.tsv" --distributed.hierarchical=true
    train "$tag-hier-1bucket" "$group" hierarchical-1bucket "$ranks" 1 "${fake[@]}" -- \
      --data.train_manifest="$out/equal.tsv" --distributed.hierarchical=true "${one_bucket[@]}"
  fi
  stop_net
  trap - EXIT
}

# link_gbit: the TCP payload rate node1 -> node2 of the network now started,
# in Gbit/s, from a transfer of about one second at the link's rate.
link_gbit() {
  local size seconds
  size=$(/usr/bin/python3 -c 'import re, sys
value, unit = re.fullmatch(r"([0-9.]+)([kmg]?)bit", sys.argv[1]).groups()
print(int(float(value) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[unit] / 8))' "$rate")
  ip netns exec "$net-node2" /usr/bin/python3 "$root/scripts/net-transfer.py" receive \
    10.201.0.2 "$size" &
  local receiver=$!
  seconds=$(ip netns exec "$net-node1" /usr/bin/python3 "$root/scripts/net-transfer.py" send \
    10.201.0.2 "$size")
  wait "$receiver"
  /usr/bin/python3 -c 'import sys; print(f"{int(sys.argv[1]) * 8 / float(sys.argv[2]) / 1e9:.4f}")' \
    "$size" "$seconds"
}

# validate_round N R TAG GROUP LAUNCHER...: the step model's validation runs
# on the network started for N nodes of R ranks (see --validate).
validate_round() {
  local nodes="$1" ranks_per_node="$2" tag="$3" group="$4"
  shift 4
  local link bucket kind name
  link=$(link_gbit)
  echo "  $tag at $rate: the link carries $link Gbit/s" >&2
  local kinds=(flat)
  ((ranks_per_node == 1)) || kinds+=(hierarchical)
  for bucket in "${validate_buckets[@]}"; do
    for kind in "${kinds[@]}"; do
      name="$tag-$kind-${bucket}mb"
      local extra=(--distributed.hierarchical=false) algorithm=mpi-flat
      [[ $kind == flat ]] || { extra=(--distributed.hierarchical=true); algorithm=mpi-hier; }
      train "$name" "$group" "validate-$kind" $((nodes * ranks_per_node)) 1 "$@" -- \
        --data.train_manifest="$out/equal.tsv" --output.timeline=true \
        --distributed.bucket_mb="$bucket" "${extra[@]}"
      /usr/bin/python3 "$root/scripts/step-model.py" validate --timeline "$out/$name/metrics.jsonl" \
        --skip "$warmup" --nodes "$nodes" --ranks-per-node "$ranks_per_node" \
        --inter-measured-gbit "$link" --bucket-mb "$bucket" --algorithm "$algorithm" |
        /usr/bin/python3 -c 'import json, sys
row = json.load(sys.stdin)
row.update(zip(["run", "round", "nodes", "ranks_per_node", "rate", "link_gbit", "bucket_mb"], sys.argv[1:]))
print(json.dumps(row))' "$name" "$round" "$nodes" "$ranks_per_node" "$rate" "$link" "$bucket" \
        >>"$validation"
    done
  done
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M UTC')
echo "small preset, $steps steps per run (figures from steps $((warmup + 1))-$steps), $rounds round(s);" \
  "load average before: $load_before"
for ((round = 1; round <= rounds; ++round)); do
  if ((local_runs)); then local_round; fi
  for spec in ${nets[@]+"${nets[@]}"}; do
    for rate in "${rates[@]}"; do
      if [[ "$spec" == *x* ]]; then net_round "${spec%x*}" "${spec#*x}"; else net_round "$spec" 1; fi
    done
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# The tables: each figure the median over rounds; hidden, vs compute and the
# ranks/threads ratio taken within each round, then their median and range.
conditions="$started; $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1));"
conditions+=" load average $load_before before, $load_after after; small preset, steps $((warmup + 1))-$steps"
conditions+=" of $steps; $rounds round(s), median (range over rounds)"
/usr/bin/python3 - "$results" "$out/table.md" "$conditions" <<'EOF' | tee "$out/table.txt"
import json, statistics, sys
results, markdown, conditions = sys.argv[1:]
rows = [json.loads(line) for line in open(results)]
rounds = sorted({r["round"] for r in rows})
names = list(dict.fromkeys(r["name"] for r in rows))

def find(round_, group, kind):
    return next((r for r in rows if r["round"] == round_ and r["group"] == group and r["kind"] == kind), None)

def derived(row):
    """hidden %, step / compute-only step, wait % of this row, within its round."""
    whole = find(row["round"], row["group"], row["kind"] + "-1bucket")
    hidden = None
    if whole and row["kind"] in ("flat", "flat-bf16", "hierarchical") and whole["comm_exposed_ms"]:
        hidden = 100 * (1 - row["comm_exposed_ms"] / whole["comm_exposed_ms"])
    alone = find(row["round"], row["group"], "alone")
    versus = None
    if alone and row["kind"].startswith(("flat", "hierarchical")):
        versus = row["step_ms"] / alone["step_ms"]
    wait_share = 100 * row["comm_wait_ms"] / row["step_ms"] if row["comm_wait_ms"] is not None else None
    return {"hidden": hidden, "versus": versus, "wait_share": wait_share}

def summary(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)

def fmt(stat, spec, ranged=False):
    if stat is None:
        return "-"
    text = format(stat[0], spec)
    if ranged and len(rounds) > 1:
        text += f" ({format(stat[1], spec)}..{format(stat[2], spec)})"
    return text

table = []
for name in names:
    mine = [r for r in rows if r["name"] == name]
    extra = [derived(r) for r in mine]
    table.append({"name": name, "group": mine[0]["group"], "kind": mine[0]["kind"],
                  "ranks": mine[0]["ranks"], "threads": mine[0]["threads"],
                  **{key: summary([r[key] for r in mine])
                     for key in ("audio_s_per_s", "step_ms", "comm_wait_ms", "comm_exposed_ms",
                                 "comm_cpu_ms", "loader_cpu_ms", "kernel_pct", "idle_pct",
                                 "ctxt_per_s")},
                  **{key: summary([e[key] for e in extra]) for key in ("hidden", "versus", "wait_share")}})

def speed_ratio(ranks_kind, threads_kind):
    ratios = []
    for round_ in rounds:
        a = next((r for r in rows if r["round"] == round_ and r["kind"] == ranks_kind), None)
        b = next((r for r in rows if r["round"] == round_ and r["kind"] == threads_kind), None)
        if a and b:
            ratios.append(a["audio_s_per_s"] / b["audio_s_per_s"])
    return summary(ratios)

notes = []
for label, ranks_kind, threads_kind in (("equal work", "flat", "threads"),
                                        ("generated corpus", "mixed-ranks", "mixed-threads")):
    ratio = speed_ratio(ranks_kind, threads_kind)
    if ratio:
        notes.append(f"this machine, {label}: ranks x 1 thread run at {fmt(ratio, '.2f', True)}x "
                     f"the speed of 1 rank x threads")

print(conditions)
print(f"{'run':<22} {'ranks':>5} {'thr':>3} {'audio-s/s':>9} {'step ms':>8} {'wait ms':>8} "
      f"{'wait%':>6} {'exposed':>7} {'hidden%':>7} {'vs compute':>10} {'comm cpu':>8} {'loader cpu':>10} "
      f"{'kernel%':>7} {'idle%':>5} {'ctxt/s':>7}")
group = None
for row in table:
    if row["group"] != group:
        group = row["group"]
        print(f"-- {group}")
    print(f"{row['name']:<22} {row['ranks']:>5} {row['threads']:>3} {fmt(row['audio_s_per_s'], '.1f'):>9} "
          f"{fmt(row['step_ms'], '.0f'):>8} {fmt(row['comm_wait_ms'], '.1f'):>8} "
          f"{fmt(row['wait_share'], '.1f'):>6} {fmt(row['comm_exposed_ms'], '.1f'):>7} "
          f"{fmt(row['hidden'], '.0f'):>7} "
          f"{fmt(row['versus'], '.3f'):>10} {fmt(row['comm_cpu_ms'], '.1f'):>8} "
          f"{fmt(row['loader_cpu_ms'], '.1f'):>10} {fmt(row['kernel_pct'], '.1f'):>7} "
          f"{fmt(row['idle_pct'], '.1f'):>5} {fmt(row['ctxt_per_s'], '.0f'):>7}")
for note in notes:
    print(note)

with open(markdown, "w") as out:
    out.write(f"Measured {conditions}.\n\n")
    out.write("| run | ranks x threads | audio-s/s | step ms | comm wait ms | comm wait % of step "
              "| exposed ms | % hidden | step / compute-only | comm thread CPU ms/step | loader CPU ms/step "
              "| machine CPU in the kernel % | machine CPU idle % | context switches /s |\n")
    out.write("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    group = None
    for row in table:
        if row["group"] != group:
            group = row["group"]
            out.write(f"| **{group}** | | | | | | | | | | | | | |\n")
        out.write(f"| {row['name']} | {row['ranks']} x {row['threads']} "
                  f"| {fmt(row['audio_s_per_s'], '.1f', True)} | {fmt(row['step_ms'], '.0f')} "
                  f"| {fmt(row['comm_wait_ms'], '.0f')} | {fmt(row['wait_share'], '.1f', True)} "
                  f"| {fmt(row['comm_exposed_ms'], '.0f', True)} "
                  f"| {fmt(row['hidden'], '.0f', True)} | {fmt(row['versus'], '.2f', True)} "
                  f"| {fmt(row['comm_cpu_ms'], '.0f')} | {fmt(row['loader_cpu_ms'], '.0f')} "
                  f"| {fmt(row['kernel_pct'], '.1f', True)} | {fmt(row['idle_pct'], '.1f', True)} "
                  f"| {fmt(row['ctxt_per_s'], '.0f', True)} |\n")
    out.write("\n" + "".join(f"- {note}\n" for note in notes))
EOF
if ((validate)); then
  /usr/bin/python3 - "$validation" "$out/validation.md" "$conditions" <<'EOF' | tee "$out/validation.txt"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
def error(predicted, measured):
    return f"{100 * (predicted - measured) / measured:+.0f}" if measured > 0 else "-"
lines = [f"Measured {sys.argv[3]}; predicted by scripts/step-model.py from each run's timeline "
         "and the link measured.", "",
         "| run | nodes x ranks | link rate | link measured Gbit/s | bucket MB "
         "| step ms predicted | measured | error % | exposed ms predicted | measured | error % |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
for r in rows:
    lines.append(
        f"| {r['run']} | {r['nodes']} x {r['ranks_per_node']} | {r['rate']} | {float(r['link_gbit']):.3f} "
        f"| {r['bucket_mb']} | {r['predicted_step_ms']:.0f} | {r['measured_step_ms']:.0f} "
        f"| {error(r['predicted_step_ms'], r['measured_step_ms'])} "
        f"| {r['predicted_exposed_ms']:.1f} | {r['measured_exposed_ms']:.1f} "
        f"| {error(r['predicted_exposed_ms'], r['measured_exposed_ms'])} |")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
fi
echo "load average after: $load_after; logs and metrics in $out; the table as Markdown in $out/table.md"
