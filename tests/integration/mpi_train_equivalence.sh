#!/usr/bin/env bash
# Data parallelism changes nothing but the speed (DESIGN.md, invariants 3 and 4):
# `mpiasr train` on 2 ranks x batch B and on 1 rank x B with training.accumulation=2
# take the same optimizer steps. Rank r takes batches r, r+2, ... of the global
# batch list, and one rank accumulating 2 micro-batches takes batches 2k, 2k+1 at
# step k, so both runs see the same batches at every step (48 utterances in
# batches of 4: an even 12 batches per epoch, so no padding and no short step at
# an epoch boundary). Both divide the summed loss by the step's token count.
# fp32, dropout 0, no SpecAugment, no dither, one thread per rank: after 10 steps
# (one epoch boundary) the model.safetensors of the two runs must agree within
# 1e-5 (max over tensors of |a - b| / |b|, 2-norms), and so must the logged
# losses; 1 rank without accumulation, which sees other batches, must not.
# The fp32 CPU backend's sums follow the host's OpenBLAS kernels and thread
# count (GEMM panels, per-thread partials), so the bound is a tolerance, not
# equality; it holds as well for the accumulation run repeated as another
# machine would run it: OpenBLAS on a core of another class than the one it
# runs here (other_blas_core: Haswell after an AVX-512 core, SkylakeX or
# Sandybridge, without FMA, after an AVX2 one) and 2 threads against the
# ranks' 1.
# With bf16 messages (distributed.allreduce_dtype) the 2-rank weights differ
# from fp32's, but by less than a tenth of what other batches make.
# The 2-rank run's comm wait figures are consistent (exposed <= wait).
# Usage: bash mpi_train_equivalence.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" mpi_train_equivalence

options=("${tiny_options[@]}" --batching.mode=fixed --batching.batch_size=4 --model.dropout=0
  --spec_augment.enabled=false --features.dither=0 --precision.mode=fp32 --training.max_steps=10
  --training.log_every=1 --data.valid_manifest=)
run_ok "$work/two_ranks.log" mpirun -np 2 --oversubscribe "$mpiasr" train "$tiny" "${options[@]}" \
  --training.accumulation=1 --output.dir="$work/two_ranks"
expect_line "$work/two_ranks.log" 'global batch = 2 ranks x 1 micro-batches' "two ranks"
run_ok "$work/two_ranks_bf16.log" mpirun -np 2 --oversubscribe "$mpiasr" train "$tiny" \
  "${options[@]}" --training.accumulation=1 --distributed.allreduce_dtype=bf16 \
  --output.dir="$work/two_ranks_bf16"
expect_line "$work/two_ranks_bf16.log" 'gradient all-reduce: MPI over 2 ranks, ring, messages in bf16' \
  "two ranks, bf16"
run_ok "$work/accumulation.log" "$mpiasr" train "$tiny" "${options[@]}" \
  --training.accumulation=2 --output.dir="$work/accumulation"
expect_line "$work/accumulation.log" 'global batch = 1 ranks x 2 micro-batches' "accumulation"
other_core="$(other_blas_core)"
[[ -n "$other_core" ]] || fail "no OpenBLAS core of another class for this CPU"
expect_blas_core "$mpiasr" "$other_core"
run_ok "$work/elsewhere.log" env OPENBLAS_CORETYPE="$other_core" "$mpiasr" train "$tiny" \
  "${options[@]}" --training.accumulation=2 --training.threads=2 --output.dir="$work/elsewhere"
expect_line "$work/elsewhere.log" "^backend: cpu-fp32 \\(2 threads, OpenBLAS $other_core\\)" "elsewhere"
run_ok "$work/one_rank.log" "$mpiasr" train "$tiny" "${options[@]}" \
  --training.accumulation=1 --output.dir="$work/one_rank"
for run in two_ranks two_ranks_bf16 accumulation elsewhere one_rank; do
  expect_line "$work/$run.log" '^training done: 10 steps' "$run"
done

PYTHONPATH="$(dirname "${BASH_SOURCE[0]}")/lib" /usr/bin/python3 - "$work" "$other_core" <<'EOF' || fail "the runs do not match (see above)"
import json, sys

from safetensors_f32 import max_relative_difference, tensors, train_losses

def losses(run):
    return train_losses(f"{sys.argv[1]}/{run}")

model = "checkpoints/step-00000010/model.safetensors"
two, accumulated, elsewhere, single = (
    tensors(f"{sys.argv[1]}/{run}/{model}")
    for run in ("two_ranks", "accumulation", "elsewhere", "one_rank"))
same, name = max_relative_difference(accumulated, two)
moved, moved_name = max_relative_difference(elsewhere, two)
other, _ = max_relative_difference(single, two)
print(f"{len(two)} tensors; 2 ranks vs 1 rank x accumulation 2: max relative difference "
      f"{same:.2e} ({name}); the same on OpenBLAS core {sys.argv[2]}, 2 threads: {moved:.2e} "
      f"({moved_name}); vs 1 rank without accumulation: {other:.2e}")
assert same <= 1e-5, "2 ranks and 1 rank x accumulation 2 differ"
assert moved <= 1e-5, f"2 ranks and 1 rank x accumulation 2 on core {sys.argv[2]} differ"
assert other > 1e-3, "1 rank without accumulation should differ: the check has no power"

# bf16 messages: the same steps, each gradient rounded to 8 significant bits
# on the way; far closer to the fp32 runs than other batches are.
bf16 = tensors(f"{sys.argv[1]}/two_ranks_bf16/{model}")
rounded, name = max_relative_difference(bf16, two)
print(f"2 ranks with bf16 messages vs fp32: max relative difference {rounded:.2e} ({name})")
assert 0 < rounded <= 0.1 * other, "bf16 messages: too far from fp32, or not rounded at all"

two_losses = losses("two_ranks")
assert [s for s, _ in two_losses] == list(range(1, 11)), two_losses
for run in ("accumulation", "elsewhere"):
    theirs = losses(run)
    assert [s for s, _ in theirs] == list(range(1, 11)), (run, theirs)
    worst = max(abs(a - b) / abs(b) for (_, a), (_, b) in zip(theirs, two_losses))
    print(f"{run}: losses of steps 1-10 agree with 2 ranks' within {worst:.2e}")
    assert worst <= 1e-5, (run, two_losses, theirs)

# In each step the exposed all-reduce is the least wait of any rank, so its
# mean over steps cannot exceed the mean wait over ranks and steps.
for r in (json.loads(line) for line in open(f"{sys.argv[1]}/two_ranks/metrics.jsonl")):
    if r["kind"] == "train":
        assert 0 <= r["comm_exposed_ms"] <= r["comm_wait_ms"] + 1e-9, r
EOF
rm -rf "$work"
echo "mpi_train_equivalence: all checks passed"
