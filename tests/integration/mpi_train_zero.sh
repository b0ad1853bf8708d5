#!/usr/bin/env bash
# ZeRO-1 (distributed.zero_stage = 1, DESIGN.md "Sharded optimizer state")
# changes where AdamW's state lives, not the training: `mpiasr train` on 2
# and on 3 ranks, with and without sharding, must end on the same weights and
# Adam moments after 12 steps (an epoch boundary, validations and clipping
# included) within fp32 rounding (max over tensors of |a - b| / |b| <= 1e-6;
# the reduce-scatter and the all-reduce may add in other orders), with the
# same logged losses and gradient norms. A sharded run stopped at step 6 and
# resumed ends bit for bit where the uninterrupted sharded run does; its
# checkpoint holds every moment by name (gathered on save), so an unsharded
# run and one on another number of ranks resume from it too. fp32, dropout 0,
# one thread per rank.
# Usage: bash mpi_train_zero.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" mpi_train_zero

options=("${tiny_options[@]}" --batching.mode=fixed --batching.batch_size=4 --model.dropout=0
  --spec_augment.enabled=false --features.dither=0 --precision.mode=fp32 --training.max_steps=12
  --training.log_every=1 --validation.every_steps=5 --optimizer.clip_norm=1.0)
train() {  # train NAME RANKS ZERO_STAGE [more options...]
  local name="$1" ranks="$2" zero="$3"
  shift 3
  run_ok "$work/$name.log" mpirun -np "$ranks" --oversubscribe "$mpiasr" train "$tiny" \
    "${options[@]}" --distributed.zero_stage="$zero" --output.dir="$work/$name" "$@"
}
for ranks in 2 3; do
  train "plain$ranks" "$ranks" 0
  train "zero$ranks" "$ranks" 1
  expect_line "$work/zero$ranks.log" "^optimizer: ZeRO-1, AdamW state sharded over $ranks ranks" \
    "zero$ranks"
  expect_line "$work/zero$ranks.log" '^training done: 12 steps' "zero$ranks"
done

# Stopped at step 6 and resumed, sharded.
train stopped 2 1 --stop-at-step=6
expect_line "$work/stopped.log" '^stopped after step 6' "stopped"
cp -r "$work/stopped/checkpoints" "$work/checkpoints6"
train stopped 2 1
expect_line "$work/stopped.log" '^resumed from .*step-00000006: step 6' "resumed"
# The sharded checkpoints, resumed unsharded on 2 ranks and sharded on 3.
for resumed in plain_from_zero:2:0 zero3_from_zero2:3:1; do
  IFS=: read -r name ranks zero <<<"$resumed"
  mkdir -p "$work/$name"
  cp -r "$work/checkpoints6" "$work/$name/checkpoints"
  train "$name" "$ranks" "$zero"
  expect_line "$work/$name.log" '^resumed from .*step-00000006: step 6' "$name"
  expect_line "$work/$name.log" '^training done: 12 steps' "$name"
done

PYTHONPATH="$(dirname "${BASH_SOURCE[0]}")/lib" /usr/bin/python3 - "$work" <<'EOF' || fail "the runs do not match (see above)"
import json, math, sys

from safetensors_f32 import tensors

work = sys.argv[1]


def compare(a, b):
    """(max relative difference, its tensor, tensors bit-identical)."""
    assert a.keys() == b.keys(), sorted(a.keys() ^ b.keys())
    worst, same = (0.0, ""), 0
    for name in a:
        diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(a[name], b[name])))
        norm = math.sqrt(sum(y * y for y in b[name]))
        worst = max(worst, (diff / max(norm, 1e-30), name))
        same += a[name] == b[name]
    return worst[0], worst[1], same

def curve(run):
    records = [json.loads(line) for line in open(f"{work}/{run}/metrics.jsonl")]
    return [(r["step"], r["loss"], r["grad_norm"]) for r in records if r["kind"] == "train"]

final = "checkpoints/step-00000012"
for ranks in (2, 3):
    for file in ("model", "optimizer"):
        plain = tensors(f"{work}/plain{ranks}/{final}/{file}.safetensors")
        zero = tensors(f"{work}/zero{ranks}/{final}/{file}.safetensors")
        worst, name, same = compare(zero, plain)
        print(f"{ranks} ranks, {file}: sharded vs not, max relative difference {worst:.2e} "
              f"({name}); {same}/{len(plain)} tensors bit-identical")
        assert worst <= 1e-6, f"{ranks} ranks: {file} differs by {worst} in {name}"
    a, b = curve(f"plain{ranks}"), curve(f"zero{ranks}")
    assert [s for s, _, _ in a] == list(range(1, 13)) and [s for s, _, _ in b] == list(range(1, 13))
    worst = max(max(abs(x[1] - y[1]) / abs(y[1]), abs(x[2] - y[2]) / abs(y[2])) for x, y in zip(b, a))
    print(f"{ranks} ranks: losses and gradient norms of steps 1-12 agree within {worst:.2e}")
    assert worst <= 1e-6, (a, b)

# Resumed sharded run = uninterrupted sharded run, bit for bit.
for file in ("model", "optimizer"):
    got = open(f"{work}/stopped/{final}/{file}.safetensors", "rb").read()
    want = open(f"{work}/zero2/{final}/{file}.safetensors", "rb").read()
    assert got == want, f"the resumed sharded run's {file} differs from the uninterrupted one"
assert curve("stopped")[-6:] == curve("zero2")[-6:], (curve("stopped"), curve("zero2"))
print("stopped at 6 and resumed, sharded: the same weights, moments and curve as the run that never stopped")

# The sharded checkpoint resumed unsharded (same ranks): the sharded run's end, to rounding.
for file in ("model", "optimizer"):
    worst, name, _ = compare(tensors(f"{work}/plain_from_zero/{final}/{file}.safetensors"),
                             tensors(f"{work}/zero2/{final}/{file}.safetensors"))
    print(f"resumed unsharded from the sharded checkpoint, {file}: max relative difference {worst:.2e}")
    assert worst <= 1e-6, f"{file} differs by {worst} in {name}"
EOF
rm -rf "$work"
echo "mpi_train_zero: all checks passed"
