#!/usr/bin/env bash
# `mpiasr` on two fake nodes of two ranks each (scripts/mpirun-fake-nodes.sh:
# own hostname, own disk at the same path $NODE_DISK), the filesystem rules of
# DESIGN.md invariants 6 and 7:
#   1. `mpiasr prepare` makes the tokenizer and the CMVN statistics on node1
#      (rank 0) and they reach node2's disk, identical;
#   2. checkpoint.fs_mode=per-node with everything under $NODE_DISK: each node
#      has every checkpoint on its own disk (the same model bytes), nothing is
#      written anywhere else, the metrics only on node1 (rank 0);
#   3. node2 loses its newest checkpoint: the rerun says so, resumes on every
#      rank from the step both nodes have, and trains on from it, repeating
#      the lost step bit for bit;
#   4. checkpoint.fs_mode=shared: exactly one writer (node1's disk gets the
#      checkpoints, node2's none).
# Usage: bash mpi_train_fake_nodes.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" mpi_train_fake_nodes
[[ $(id -u) -eq 0 ]] || fail "fake nodes need root (UTS and mount namespaces)"

nodes="$work/nodes"  # nodes/node1, nodes/node2: each node's disk
disk="$work/node-disk"
fake=("$source_dir/scripts/mpirun-fake-nodes.sh" --nodes 2 --ranks-per-node 2
  --nodes-root "$nodes" --node-disk "$disk")
options=("${tiny_options[@]}" --training.log_every=1 --data.valid_manifest= --checkpoint.keep_last=3)

# 1. prepare on one node, the files on both.
run_ok "$work/prepare.log" "${fake[@]}" "$mpiasr" prepare "$tiny" "${options[@]}" \
  --output.dir="$disk/prepared"
expect_line "$work/prepare.log" "^ready: $disk/prepared/tokens.txt, $disk/prepared/cmvn.json" "prepare"
for file in tokens.txt cmvn.json; do
  for node in node1 node2; do
    [[ -s "$nodes/$node/prepared/$file" ]] || fail "prepare: no $file on $node's disk"
  done
  cmp "$nodes/node1/prepared/$file" "$nodes/node2/prepared/$file" || fail "prepare: $file differs"
done
(($(grep -c '^tokenizer: ' "$work/prepare.log") == 1)) || fail "prepare: the tokenizer was not made once"
echo "  tokens.txt and cmvn.json on both nodes' disks"

# 2. Per-node checkpoints: 8 steps, a checkpoint every 4.
per_node=("${options[@]}" --checkpoint.fs_mode=per-node --checkpoint.every_steps=4
  --output.dir="$disk/run")
run_ok "$work/per-node.log" "${fake[@]}" "$mpiasr" train "$tiny" "${per_node[@]}" \
  --training.max_steps=8
expect_line "$work/per-node.log" '^training done: 8 steps' "per-node"
expect_line "$work/per-node.log" '^mpiasr train: rank 0/4 \(node1\): local rank 0/2 on node 0/2' "topology"
for step in 00000004 00000008; do
  for node in node1 node2; do
    for file in model.safetensors optimizer.safetensors state.json config.yaml tokens.txt cmvn.json; do
      [[ -s "$nodes/$node/run/checkpoints/step-$step/$file" ]] ||
        fail "per-node: no step-$step/$file on $node's disk"
    done
  done
  cmp "$nodes/node1/run/checkpoints/step-$step/model.safetensors" \
    "$nodes/node2/run/checkpoints/step-$step/model.safetensors" || fail "per-node: step $step differs"
done
[[ -s "$nodes/node1/run/metrics.jsonl" && ! -e "$nodes/node2/run/metrics.jsonl" ]] ||
  fail "per-node: metrics.jsonl should be on node1's disk only"
[[ -z "$(ls -A "$disk")" ]] || fail "files written to the mount point itself: $(ls -A "$disk")"
stray=$(find "$work" -name 'step-0*' -not -path "$nodes/node[12]/run/checkpoints/*")
[[ -z "$stray" ]] || fail "checkpoints outside the nodes' disks: $stray"
echo "  steps 4 and 8 on both nodes' disks, nowhere else"

# 3. node2 loses step 8: every rank resumes from step 4, the newest both have.
cp "$nodes/node1/run/checkpoints/step-00000008/model.safetensors" "$work/step8-model.safetensors"
rm -rf "$nodes/node2/run/checkpoints/step-00000008"
run_ok "$work/resume.log" "${fake[@]}" "$mpiasr" train "$tiny" "${per_node[@]}" \
  --training.max_steps=12
expect_line "$work/resume.log" '^node 1 \(node2\) lacks step 8; resuming from 4$' "fallback message"
expect_line "$work/resume.log" "^resumed from $disk/run/checkpoints/step-00000004: step 4," "resume"
grep -E '^(node 1|resumed from)' "$work/resume.log"
first_step=$(sed -n 's|^step \([0-9]*\)/12 .*|\1|p' "$work/resume.log" | head -n 1)
((first_step == 5)) || fail "resume: the first step trained is ${first_step:-none}, not 5"
expect_line "$work/resume.log" '^training done: 12 steps' "resume"
for node in node1 node2; do
  for step in 00000008 00000012; do
    [[ $(state_field "$nodes/$node/run/checkpoints/step-$step" step) == $((10#$step)) ]] ||
      fail "resume: no step-$step with its state on $node's disk"
  done
done
cmp "$work/step8-model.safetensors" "$nodes/node2/run/checkpoints/step-00000008/model.safetensors" ||
  fail "resume: step 8 trained again differs from the first run's"
echo "  resumed from step 4 and trained to 12; step 8 written again, bit for bit as before"

# 4. Shared mode: world rank 0 (on node1) is the only writer.
run_ok "$work/shared.log" "${fake[@]}" "$mpiasr" train "$tiny" "${options[@]}" \
  --checkpoint.fs_mode=shared --checkpoint.every_steps=2 --training.max_steps=4 \
  --output.dir="$disk/shared"
expect_line "$work/shared.log" '^training done: 4 steps' "shared"
for step in 00000002 00000004; do
  [[ -s "$nodes/node1/shared/checkpoints/step-$step/model.safetensors" ]] ||
    fail "shared: no step-$step on node1's disk"
done
[[ ! -e "$nodes/node2/shared/checkpoints" ]] || fail "shared: node2 wrote $(ls "$nodes/node2/shared/checkpoints")"
echo "  shared: checkpoints on node1's disk only"
rm -rf "$work"
echo "mpi_train_fake_nodes: all checks passed"
