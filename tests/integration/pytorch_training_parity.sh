#!/usr/bin/env bash
# PyTorch parity of a training step, the recipe as a whole: the loss divided
# by the step's tokens over ranks and micro-batches, the gradient norm and its
# clipping, AdamW with weight decay on weights only and its bias corrections,
# the warmup and cosine schedule, the sampler's shortest-first epoch and
# balanced steps. Usage: bash pytorch_training_parity.sh BUILD_DIR SOURCE_DIR
#
# `tiny` (dropout 0) writes its initialized model (--stop-at-step 0), then
# trains 12 steps on 2 ranks x 2 micro-batches of dynamic batches, logging
# every batch (output.batch_log); scripts/pytorch/train_reference.py replays
# those steps in float64 from the same initial weights with PyTorch's own
# CTC loss, clip_grad_norm_ and AdamW, after checking that the initial
# weights are distributed as PyTorch's default initialization. mpiasr's loss and gradient norm at
# every step must match within 1e-5 relative (its float32 against float64;
# 3e-7 measured; AdamW's eps at 1e-8 instead of 1e-9 moves it by 2e-5, weight
# decay on every tensor by 4e-4): the replay is a second implementation.
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" pytorch_training_parity

python=/usr/bin/python3
"$python" -c "import torch, numpy, yaml, soundfile" 2>"$work/import.log" ||
  fail "$python cannot import torch, numpy, yaml and soundfile: install python3-torch python3-numpy python3-yaml python3-soundfile (bash scripts/install-deps.sh): $(tail -1 "$work/import.log")"

options=("${tiny_options[@]}" --data.valid_manifest= --batching.mode=dynamic
  --batching.max_batch_seconds=12 --batching.max_batch_utterances=6 --batching.num_buckets=4
  --batching.shortest_first_epochs=1 --model.dropout=0 --spec_augment.enabled=false
  --features.dither=0 --precision.mode=fp32 --schedule.type=cosine --schedule.warmup_steps=4
  --optimizer.lr=3e-3 --optimizer.weight_decay=0.05 --optimizer.clip_norm=2
  --training.accumulation=2 --training.max_steps=12 --training.log_every=1
  --output.batch_log=true --output.dir="$work/run")
run_ok "$work/init.log" mpirun -np 2 --oversubscribe "$mpiasr" train "$tiny" "${options[@]}" \
  --checkpoint.dir="$work/init" --stop-at-step=0
[[ -f "$work/init/step-00000000/model.safetensors" ]] || fail "no step-0 checkpoint"
run_ok "$work/train.log" mpirun -np 2 --oversubscribe "$mpiasr" train "$tiny" "${options[@]}"
expect_line "$work/train.log" '^training done: 12 steps' "training"
expect_line "$work/train.log" 'global batch = 2 ranks x 2 micro-batches' "the split"

run_ok "$work/replay.log" "$python" "$source_dir/scripts/pytorch/train_reference.py" \
  --run "$work/run" --init "$work/init/step-00000000" --float64 --threads 1 --check-init \
  --compare "$work/run/metrics.jsonl" --out "$work/replay.jsonl"
cat "$work/replay.log"

"$python" - "$work/replay.jsonl" <<'EOF' || fail "PyTorch's replay of the steps differs from mpiasr (see above)"
import json, sys

records = [json.loads(line) for line in open(sys.argv[1])]
assert len(records) == 12, f"{len(records)} steps replayed, expected 12"
worst = 0.0
clipped = 0
for r in records:
    for ours, theirs in (("loss", "mpiasr_loss"), ("grad_norm", "mpiasr_grad_norm")):
        worst = max(worst, abs(r[ours] - r[theirs]) / abs(r[ours]))
    clipped += r["grad_norm"] > 2
print(f"max relative difference {worst:.2e} over 12 steps; {clipped} steps clipped")
assert clipped > 0, "no step was clipped: clipping went untested"
assert clipped < 12, "every step was clipped: the unclipped update went untested"
assert worst <= 1e-5, f"max relative difference {worst:.2e} > 1e-5"
EOF
echo "PyTorch training parity: ok"
