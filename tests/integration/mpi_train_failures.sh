#!/usr/bin/env bash
# `mpiasr train` on 3 ranks when something goes wrong (DESIGN.md, invariants 5
# and 8): nobody hangs, every rank exits non-zero, and the message says why.
#   1. rank 1 is killed with SIGKILL during training: mpirun ends the job,
#      non-zero, within seconds, and no rank is left running;
#   2. rank 2 stops (SIGSTOP: it hangs instead of dying): the others give up
#      after distributed.timeout_s, naming the step and the collective they
#      waited in and the rank that did not arrive (2, with its host), with
#      exit code 5 (distributed failure);
#   3. rank 1 gets another config (a wrapper adds an override by
#      OMPI_COMM_WORLD_RANK): every rank reports the mismatch, exit code 5,
#      and rank 1 names the key that differs;
#   4. the train manifest differs between two fake nodes (the same path on
#      each node's own disk, one utterance fewer on node2): every rank reports
#      the mismatch, exit code 5;
#   5. mpirun itself is killed with SIGKILL: the ranks stop within seconds
#      and write no checkpoint whose log line is lost.
# Usage: bash mpi_train_failures.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" mpi_train_failures

launched=""  # the timeout process that runs mpirun, while one runs in the background
trap '[[ -z "$launched" ]] || kill -9 -- "-$launched" 2>/dev/null || true' EXIT

now_ms() { date +%s%3N; }

# running PID: the process exists and is not a zombie (an exited rank whose
# parent, mpirun, is gone may wait for a reaper that never comes).
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [[ "${stat##*) }" != Z* ]]
}

# start_long_run NAME TIMEOUT_S [OPTION...]: three ranks training "for ever"
# in the background (launched = its pid, in its own process group), until
# step 3 is logged; then mpirun_pid = mpirun's pid and ranks = (pid of rank
# 0, 1, 2).
start_long_run() {
  local log="$work/$1.log" pid rank
  echo "+ mpirun -np 3 mpiasr train (background, $log)"
  set -m
  timeout 120 mpirun -np 3 --oversubscribe "$mpiasr" train "$tiny" "${tiny_options[@]}" \
    --training.max_steps=100000 --training.log_every=1 --distributed.timeout_s="$2" \
    --output.dir="$work/$1" "${@:3}" >"$log" 2>&1 &
  launched=$!
  set +m
  for _ in $(seq 600); do
    grep -q '^step 3/' "$log" && break
    kill -0 "$launched" 2>/dev/null || { cat "$log" >&2; fail "$1: the run ended early"; }
    sleep 0.1
  done
  grep -q '^step 3/' "$log" || { tail "$log" >&2; fail "$1: no step 3 within 60 s"; }
  mpirun_pid=$(pgrep -P "$launched")
  ranks=()
  for pid in $(pgrep -P "$mpirun_pid"); do
    rank=$(tr '\0' '\n' <"/proc/$pid/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [[ -n "$rank" ]] && ranks[rank]=$pid
  done
  ((${#ranks[@]} == 3)) || fail "$1: found ${#ranks[@]} rank processes under mpirun $mpirun_pid"
}

# wait_for_end NAME LIMIT_S: waits for the background run; it must have exited
# non-zero (sets `status`) within LIMIT_S seconds of `started`, leaving no
# rank behind.
wait_for_end() {
  local took_ms pid
  status=0
  wait "$launched" || status=$?
  took_ms=$(($(now_ms) - started))
  launched=""
  echo "  exit code $status after $took_ms ms"
  ((status != 0 && status != 124)) || { tail "$work/$1.log" >&2; fail "$1: exit code $status"; }
  ((took_ms <= $2 * 1000)) || fail "$1: took $took_ms ms, more than $2 s"
  for pid in "${ranks[@]}"; do
    while running "$pid" && (($(now_ms) - started <= $2 * 1000)); do sleep 0.1; done
    ! running "$pid" || fail "$1: rank process $pid still running after $2 s"
  done
  echo "  no rank left after $(($(now_ms) - started)) ms"
}

# 1. A rank dies.
start_long_run killed 60
echo "+ kill -9 rank 1 (pid ${ranks[1]})"
started=$(now_ms)
kill -9 "${ranks[1]}"
wait_for_end killed 20
expect_line "$work/killed.log" 'rank 1 .*(exited on signal 9|killed)' "killed"

# 2. A rank hangs: the collective timeout (5 s) ends the job. The rank that
#    reports may first name the other waiting rank, when that one was still
#    in an earlier collective (it is listed before rank 2, in rank order).
start_long_run stopped 5
echo "+ kill -STOP rank 2 (pid ${ranks[2]})"
started=$(now_ms)
kill -STOP "${ranks[2]}"
wait_for_end stopped 30
((status == 5)) || fail "hang: exit code $status, not 5"
expect_line "$work/stopped.log" \
  "^rank [01]: step [0-9]+: .+ did not finish within 5 s; (waiting for rank [01] [^;]*; )?waiting for rank 2 \\($(hostname)\\): no answer within 2 s" \
  "hang: the stopped rank named"
grep -E -m1 'did not finish' "$work/stopped.log"

# 3. One rank's config differs.
cat >"$work/rank1-override.sh" <<'EOF'
#!/bin/bash
# Runs "$@", adding an override on world rank 1 only.
extra=()
[[ "${OMPI_COMM_WORLD_RANK:-}" == 1 ]] && extra=(--optimizer.lr=2e-3)
exec "$@" "${extra[@]}"
EOF
chmod +x "$work/rank1-override.sh"
run_fails "$work/config.log" mpirun -np 3 --oversubscribe "$work/rank1-override.sh" "$mpiasr" \
  train "$tiny" "${tiny_options[@]}" --output.dir="$work/config"
((status == 5)) || { tail "$work/config.log" >&2; fail "config mismatch: exit code $status, not 5"; }
for rank in 0 1 2; do
  expect_line "$work/config.log" "^mpiasr train: rank $rank: error: config differs between ranks: rank 1 \(" \
    "config mismatch, rank $rank"
done
expect_line "$work/config.log" '^rank 1 \([^)]*\): config differs from rank 0.s: optimizer.lr: 0.001 -> 0.002$' \
  "config mismatch: the key"
grep -m1 'config differs' "$work/config.log"

# 4. The manifest differs between nodes: node1 has 48 utterances at
# $NODE_DISK/train.tsv, node2 47 (absolute audio paths into the corpus).
nodes="$work/nodes"
for node in node1 node2; do mkdir -p "$nodes/$node"; done
sed "s|^|$corpus/|" "$corpus/train.tsv" >"$nodes/node1/train.tsv"
head -n 47 "$nodes/node1/train.tsv" >"$nodes/node2/train.tsv"
run_fails "$work/manifest.log" "$source_dir/scripts/mpirun-fake-nodes.sh" --nodes 2 \
  --ranks-per-node 1 --nodes-root "$nodes" --node-disk "$work/node-disk" "$mpiasr" train "$tiny" \
  "${tiny_options[@]}" --data.train_manifest="$work/node-disk/train.tsv" \
  --output.dir="$work/node-disk/run"
((status == 5)) || { tail "$work/manifest.log" >&2; fail "manifest mismatch: exit code $status, not 5"; }
for rank in 0 1; do
  expect_line "$work/manifest.log" \
    "^mpiasr train: rank $rank: error: train manifest differs between ranks: rank 1 \(node2\)" \
    "manifest mismatch, rank $rank"
done
grep -m1 'manifest differs' "$work/manifest.log"

# 5. mpirun is killed. Its ranks are reparented and their output goes
#    nowhere: they stop at the next step boundary, or before a checkpoint,
#    without writing one (README, "Failures"). Only a checkpoint whose write
#    was under way at the kill may complete unlogged, so none is newer than
#    the step after the last one logged. (Before, the ranks trained on for
#    about a second, until OpenMPI ended them, writing checkpoints of steps
#    no line names; that second, not this check, bounds their life then.)
start_long_run launcher 60 --checkpoint.every_steps=1
echo "+ kill -9 mpirun (pid $mpirun_pid)"
started=$(now_ms)
kill -9 "$mpirun_pid"
wait_for_end launcher 5
last_logged=$(grep -Eo '^step [0-9]+/' "$work/launcher.log" | tail -n 1 | tr -dc 0-9)
newest=$(find "$work/launcher/checkpoints" -maxdepth 1 -name 'step-*' -printf '%f\n' |
  sed 's/^step-0*//' | sort -n | tail -n 1)
echo "  last step logged $last_logged, newest checkpoint step $newest"
((newest <= last_logged + 1)) ||
  fail "mpirun killed: a checkpoint of step $newest, but the last step logged is $last_logged"
rm -rf "$work"
echo "mpi_train_failures: all checks passed"
