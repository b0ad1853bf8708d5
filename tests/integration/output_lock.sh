#!/usr/bin/env bash
# One training run per output folder (docs/training.md, "One run per output
# folder"): the ranks that write output.dir hold its lock, output.dir/mpiasr.lock,
# from start to end.
#   1. staggered: a run trains in the background; a second train on its
#      folder, alone and under mpirun -np 2, and a prepare stop at start with
#      exit 7, every rank naming the folder and the holder (host, process id,
#      start time); eval and transcribe read the folder meanwhile; the first
#      run, stopped with SIGTERM, has the metrics line of every step it took
#      and every checkpoint it wrote;
#   2. at once: two runs started together (two processes; two mpirun -np 2
#      jobs): one exits 7 naming the other, which trains on and, stopped,
#      keeps every metrics line and checkpoint;
#   3. stale: a run killed with SIGKILL leaves its lock behind; the next run
#      takes it over, saying whose it was, resumes from the killed run's
#      newest checkpoint, and empties the lock file when it ends;
#   4. per-node, on two fake nodes of two ranks (each node's disk its own):
#      a second run stops with exit 7 naming node1's holder; the first run
#      killed (SIGKILL of the holders the lock files name), a third takes
#      over both nodes' locks; per-node with output.dir one folder both nodes
#      see stops with exit 2, saying so.
# Usage: bash output_lock.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" output_lock
[[ $(id -u) -eq 0 ]] || fail "fake nodes need root (UTS and mount namespaces)"

declare -A launched  # run name -> pid of the timeout that runs it, in its own process group
cleanup() {
  local pid
  for pid in "${launched[@]}"; do kill -9 -- "-$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# Training that goes on until it is stopped: no validation, a metrics line
# every step, a checkpoint every 2 steps, every checkpoint kept.
long=("${tiny_options[@]}" --data.valid_manifest= --training.epochs=100000
  --training.max_steps=100000000 --training.log_every=1 --checkpoint.every_steps=2
  --checkpoint.keep_last=100000)
mpirun2=(mpirun -np 2 --oversubscribe)
host=$(hostname)

# start NAME COMMAND...: runs COMMAND in the background (log $work/NAME.log).
start() {
  local name="$1"
  shift
  echo "+ [$name, background] $*"
  set -m
  timeout 300 "$@" >"$work/$name.log" 2>&1 &
  launched[$name]=$!
  set +m
}

running() { kill -0 "${launched[$1]}" 2>/dev/null; }

# wait_for_step NAME STEP: NAME's log has the progress line of STEP (within 60 s).
wait_for_step() {
  for _ in $(seq 600); do
    grep -q "^step $2/" "$work/$1.log" && return
    running "$1" || { tail "$work/$1.log" >&2; fail "$1 ended before step $2"; }
    sleep 0.1
  done
  fail "$1: no step $2 within 60 s"
}

# finish NAME CODE: waits for NAME, which must exit with CODE.
finish() {
  local status=0
  wait "${launched[$1]}" || status=$?
  unset "launched[$1]"
  ((status == $2)) || { tail -n 20 "$work/$1.log" >&2; fail "$1: exit code $status, expected $2"; }
}

# holder_pid LOCK_FILE: the process its record names.
holder_pid() {
  local pid
  pid=$(sed -n 's/^pid: //p' "$1" 2>/dev/null)
  [[ -n "$pid" ]] || fail "no holder recorded in $1"
  echo "$pid"
}

# refused LOG DIR HOST PID [RANK...]: every rank given (none: a single
# process) stopped naming DIR and its holder, process PID on HOST.
refused() {
  local log="$1" dir="$2" host="$3" pid="$4" rank prefix
  shift 4
  for rank in "${@:-}"; do
    prefix="mpiasr [a-z]+: ${rank:+rank $rank: }error: "
    expect_line "$log" "^${prefix}output.dir '$dir' is in use by mpiasr train on host $host, process $pid, started [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8} [+-][0-9]{4} \\(its lock file $dir/mpiasr.lock\\): wait for that run to end, or give this one another output.dir" \
      "$log: the refusal"
  done
}

# stop_and_check NAME DIR: stops the run holding DIR with SIGTERM to the
# process its lock names (its rank 0; the others stop with it), then checks
# that it lost nothing: a metrics line for each of its steps 1..S, and the
# checkpoints of steps 2, 4, ... and S, each holding its step.
stop_and_check() {
  echo "+ kill -TERM $(holder_pid "$2/mpiasr.lock") ($1's rank 0)"
  kill -TERM "$(holder_pid "$2/mpiasr.lock")"
  finish "$1" 143
  local stopped
  stopped=$(sed -n 's/^stopped after step \([0-9]*\);.*/\1/p' "$work/$1.log")
  [[ -n "$stopped" ]] || fail "$1: no 'stopped after step' line"
  /usr/bin/python3 - "$2" "$stopped" <<'EOF' || fail "$1: metrics or checkpoints lost"
import json, os, sys
run, stopped = sys.argv[1], int(sys.argv[2])
steps = [json.loads(line)["step"] for line in open(f"{run}/metrics.jsonl")]
assert steps == list(range(1, stopped + 1)), f"metrics steps {steps}, expected 1..{stopped}"
folders = sorted(f for f in os.listdir(f"{run}/checkpoints") if f.startswith("step-"))
expected = sorted({f"step-{s:08d}" for s in list(range(2, stopped + 1, 2)) + [stopped]})
assert folders == expected, f"checkpoints {folders}, expected {expected}"
for folder in folders:
    state = json.load(open(f"{run}/checkpoints/{folder}/state.json"))
    assert f"step-{state['step']:08d}" == folder, (folder, state["step"])
print(f"  metrics of steps 1..{stopped} and {len(folders)} checkpoints, all kept")
EOF
  [[ ! -s "$2/mpiasr.lock" ]] || fail "$1: the lock file still holds $(cat "$2/mpiasr.lock")"
}

# 1. Staggered.
dir="$work/staggered"
start first "$mpiasr" train "$tiny" "${long[@]}" --output.dir="$dir"
wait_for_step first 3
holder=$(holder_pid "$dir/mpiasr.lock")
expect_exit 7 second "$mpiasr" train "$tiny" "${long[@]}" --output.dir="$dir"
refused "$work/second.err" "$dir" "$host" "$holder"
expect_exit 7 second_mpirun "${mpirun2[@]}" "$mpiasr" train "$tiny" "${long[@]}" --output.dir="$dir"
refused "$work/second_mpirun.err" "$dir" "$host" "$holder" 0 1
expect_exit 7 prepare "$mpiasr" prepare "$tiny" "${long[@]}" --output.dir="$dir"
refused "$work/prepare.err" "$dir" "$host" "$holder"
grep -m1 'error: ' "$work/second.err"
expect_exit 0 eval "$mpiasr" eval --ckpt "$dir" --manifest "$corpus/test.tsv"
expect_line "$work/eval.log" '^CER [0-9.]+%' "eval of the folder being trained"
mapfile -t files < <(cut -f1 "$corpus/test.tsv" | head -2 | sed "s|^|$corpus/|")
expect_exit 0 transcribe "$mpiasr" transcribe --ckpt "$dir/checkpoints/step-00000002" "${files[@]}"
(($(wc -l <"$work/transcribe.out") == 2)) || fail "transcribe printed $(wc -l <"$work/transcribe.out") lines"
echo "  eval and transcribe read the folder being trained"
stop_and_check first "$dir"

# 2. At once: two processes, then two mpirun jobs.
for launcher in single mpirun; do
  dir="$work/at_once_$launcher"
  command=("$mpiasr" train "$tiny" "${long[@]}" --output.dir="$dir")
  ranks=()
  if [[ $launcher == mpirun ]]; then
    command=("${mpirun2[@]}" "${command[@]}")
    ranks=(0 1)
  fi
  start a "${command[@]}"
  start b "${command[@]}"
  for _ in $(seq 600); do
    if ! running a || ! running b; then break; fi
    sleep 0.1
  done
  if ! running a; then loser=a winner=b; elif ! running b; then loser=b winner=a; else
    fail "$launcher: both runs still train after 60 s"
  fi
  finish "$loser" 7
  wait_for_step "$winner" 3
  refused "$work/$loser.log" "$dir" "$host" "$(holder_pid "$dir/mpiasr.lock")" "${ranks[@]}"
  echo "  $launcher: run $loser refused, run $winner trains"
  stop_and_check "$winner" "$dir"
done

# 3. A stale lock: the holder killed with SIGKILL.
dir="$work/stale"
start killed "$mpiasr" train "$tiny" "${long[@]}" --output.dir="$dir"
wait_for_step killed 3
holder=$(holder_pid "$dir/mpiasr.lock")
echo "+ kill -9 $holder"
kill -9 "$holder"
finish killed 137
[[ -s "$dir/mpiasr.lock" ]] || fail "stale: the killed run's lock file is empty"
newest=$(find "$dir/checkpoints" -maxdepth 1 -name 'step-*' -printf '%f\n' | sort | tail -n 1)
newest=$((10#${newest#step-}))
expect_exit 0 takeover "$mpiasr" train "$tiny" "${long[@]}" --output.dir="$dir" \
  --stop-at-step=$((newest + 2))
expect_line "$work/takeover.err" \
  "^rank 0 \\($host\\): output.dir '$dir': took over the lock $dir/mpiasr.lock of mpiasr train on host $host, process $holder, started [0-9-]+ [0-9:]+ [+-][0-9]{4}, which ended without releasing it \\(killed, or its node lost\\)$" \
  "stale: the takeover"
expect_line "$work/takeover.out" "^resumed from $dir/checkpoints/$(printf 'step-%08d' "$newest"): step $newest," \
  "stale: the resume"
[[ ! -s "$dir/mpiasr.lock" ]] || fail "stale: the lock file still holds $(cat "$dir/mpiasr.lock")"
grep -m1 'took over' "$work/takeover.err"

# 4. Per-node, on two fake nodes.
nodes="$work/nodes"  # nodes/node1, nodes/node2: each node's disk
disk="$work/node-disk"
fake=("$source_dir/scripts/mpirun-fake-nodes.sh" --nodes 2 --ranks-per-node 2
  --nodes-root "$nodes" --node-disk "$disk")
per_node=("${long[@]}" --checkpoint.fs_mode=per-node --output.dir="$disk/run")
start per_node "${fake[@]}" "$mpiasr" train "$tiny" "${per_node[@]}"
wait_for_step per_node 3
holder1=$(holder_pid "$nodes/node1/run/mpiasr.lock")
holder2=$(holder_pid "$nodes/node2/run/mpiasr.lock")
grep -qx 'host: node2' "$nodes/node2/run/mpiasr.lock" || fail "per-node: node2's lock is not node2's"
expect_exit 7 per_node_second "${fake[@]}" "$mpiasr" train "$tiny" "${per_node[@]}"
refused "$work/per_node_second.err" "$disk/run" node1 "$holder1" 0 1 2 3
echo "+ kill -9 $holder1 $holder2 (the holders on node1 and node2)"
kill -9 "$holder1" "$holder2"
status=0
wait "${launched[per_node]}" || status=$?
unset "launched[per_node]"
((status != 0)) || fail "per-node: the killed run exited 0"
common=$(comm -12 <(ls "$nodes/node1/run/checkpoints") <(ls "$nodes/node2/run/checkpoints") |
  grep '^step-' | tail -n 1)
common=$((10#${common#step-}))
expect_exit 0 per_node_takeover "${fake[@]}" "$mpiasr" train "$tiny" "${per_node[@]}" \
  --stop-at-step=$((common + 2))
for node in 1 2; do
  rank=$((2 * (node - 1)))
  holder=$([[ $node == 1 ]] && echo "$holder1" || echo "$holder2")
  expect_line "$work/per_node_takeover.err" \
    "^rank $rank \\(node$node\\): output.dir '$disk/run': took over the lock $disk/run/mpiasr.lock of mpiasr train on host node$node, process $holder, started .*, which ended without releasing it" \
    "per-node: node$node's takeover"
  [[ ! -s "$nodes/node$node/run/mpiasr.lock" ]] || fail "per-node: node$node's lock file is not empty"
done
expect_line "$work/per_node_takeover.out" "^resumed from $disk/run/checkpoints/$(printf 'step-%08d' "$common"): step $common," \
  "per-node: the resume"
grep 'took over' "$work/per_node_takeover.err"
expect_exit 2 per_node_shared "${fake[@]}" "$mpiasr" train "$tiny" "${tiny_options[@]}" \
  --training.max_steps=2 --checkpoint.fs_mode=per-node --output.dir="$work/seen_by_both"
expect_line "$work/per_node_shared.err" \
  "^mpiasr train: rank 0: error: output.dir '$work/seen_by_both' is one folder that several nodes of this run see \\(its lock file $work/seen_by_both/mpiasr.lock is held by this run's mpiasr train on host node[12], process [0-9]+, started .*\\), but checkpoint.fs_mode is per-node" \
  "per-node on one folder"
grep -m1 'error: ' "$work/per_node_shared.err"
rm -rf "$work"
echo "output_lock: all checks passed"
