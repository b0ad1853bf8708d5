#!/usr/bin/env bash
# Every rank runs the same number of steps when the data does not divide by the
# ranks (DESIGN.md, invariant 3): 3 ranks train on 47 utterances. Each rank is a
# fake node of its own (scripts/mpirun-fake-nodes.sh) with per-node checkpoints,
# so each rank's own count of steps, epochs and batches lands in the state.json
# on its own disk; all three must agree with each other and with rank 0's log.
#   fixed batches of 5:   10 batches, padded to 12 -> 4 steps per epoch, 8 in 2 epochs
#   the same, drop_last:  trimmed to 9 -> 3 steps per epoch, 6 in 2 epochs
#   dynamic batches:      duration buckets, 3 epochs, as many steps as the schedule counts
# A rank with fewer batches would leave the others waiting in a collective, so
# the runs also have a 20 s collective timeout.
# Usage: bash mpi_train_steps.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" mpi_train_steps
[[ $(id -u) -eq 0 ]] || fail "fake nodes need root (UTS and mount namespaces)"

manifest="$work/train47.tsv"
head -n 47 "$corpus/train.tsv" | sed "s|^|$corpus/|" >"$manifest"
nodes="$work/nodes"
disk="$work/node-disk"
fake=("$source_dir/scripts/mpirun-fake-nodes.sh" --nodes 3 --ranks-per-node 1
  --nodes-root "$nodes" --node-disk "$disk")
options=("${tiny_options[@]}" --data.train_manifest="$manifest" --data.valid_manifest=
  --training.max_steps=0 --checkpoint.fs_mode=per-node --distributed.timeout_s=20)

# check_run NAME EPOCHS [STEPS]: rank 0 logged STEPS steps (default: the
# schedule's count), and every node's last checkpoint is that step at the
# start of epoch EPOCHS.
check_run() {
  local log="$work/$1.log" planned steps node state
  planned=$(sed -n 's/^schedule: .*, \([0-9]*\) steps in all;.*/\1/p' "$log")
  steps="${3:-$planned}"
  ((planned == steps)) || fail "$1: the schedule has $planned steps, expected $steps"
  expect_line "$log" "^training done: $steps steps" "$1"
  for node in node1 node2 node3; do
    state="$nodes/$node/$1/checkpoints/step-$(printf '%08d' "$steps")"
    [[ -f "$state/state.json" ]] || fail "$1: no checkpoint of step $steps on $node"
    [[ "$(state_field "$state" step) $(state_field "$state" epoch) $(state_field "$state" \
      batch_in_epoch)" == "$steps $2 0" ]] || fail "$1: $node's state.json: $(cat "$state/state.json")"
  done
  echo "  $1: every rank trained $steps steps, $2 epochs"
}

run_ok "$work/padded.log" "${fake[@]}" "$mpiasr" train "$tiny" "${options[@]}" \
  --batching.mode=fixed --batching.batch_size=5 --training.epochs=2 --output.dir="$disk/padded"
check_run padded 2 8
run_ok "$work/trimmed.log" "${fake[@]}" "$mpiasr" train "$tiny" "${options[@]}" \
  --batching.mode=fixed --batching.batch_size=5 --batching.drop_last=true --training.epochs=2 \
  --output.dir="$disk/trimmed"
check_run trimmed 2 6
run_ok "$work/dynamic.log" "${fake[@]}" "$mpiasr" train "$tiny" "${options[@]}" \
  --batching.mode=dynamic --batching.max_batch_seconds=15 --batching.num_buckets=3 \
  --training.epochs=3 --output.dir="$disk/dynamic"
check_run dynamic 3
rm -rf "$work"
echo "mpi_train_steps: all checks passed"
