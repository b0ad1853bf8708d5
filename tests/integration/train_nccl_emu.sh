#!/usr/bin/env bash
# `mpiasr train` on the CUDA backend with NCCL, run on the CPU: mpiasr_emu
# (the emulated CUDA runtime and NCCL of kernels/cuda_emu), `tiny` in
# bf16-mixed, batches of 2, 2 steps, dropout 0, no SpecAugment, no dither,
# every rank on an emulated device of its own:
#   1. 2 ranks (the NCCL gradient reducer, fp32 wire) take the steps of 1
#      rank with training.accumulation = 2 (DESIGN.md, invariants 3 and 4):
#      weights and losses are the same bits (max over tensors of |a - b| /
#      |b|, 2-norms, is 0). The emulator computes the same bits on any host:
#      its kernels sum in fixed orders without atomics, its cuBLASLt sums
#      each element's exact 16-bit products in ascending k, and a 2-rank
#      ring all-reduce adds the same two terms as accumulation does. 1 rank
#      without accumulation, which sees other batches, must differ;
#   1b. the accumulation run again as another machine would run it: OpenBLAS
#      on a core of another class than the one it runs here (other_blas_core:
#      Haswell after an AVX-512 core, SkylakeX or Sandybridge after an AVX2
#      one), 2 OpenBLAS and OpenMP threads and
#      training.threads = 2 against 1: the same bits again;
#   2. ZeRO-1 on NCCL (each bucket reduce-scattered, the norm's sum of
#      squares all-reduced, the masters all-gathered) ends on the weights of
#      the unsharded 2-rank run within 1e-6 and logs the same losses, the
#      tolerance of the CPU's mpi_train_zero.sh.
# Without the emulation build (MPIASR_CUDA_EMU=OFF) it prints SKIP and passes.
# Usage: bash train_nccl_emu.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
if [[ ! -x "$1/mpiasr_emu" ]]; then
  echo "SKIP: $1/mpiasr_emu not built (MPIASR_CUDA_EMU=OFF)"
  exit 0
fi
train_setup "$1" "$2" train_nccl_emu mpiasr_emu

options=("${tiny_options[@]}" --batching.mode=fixed --batching.batch_size=2 --model.dropout=0
  --spec_augment.enabled=false --features.dither=0 --training.device=cuda
  --precision.mode=bf16-mixed --training.max_steps=2 --training.log_every=1
  --data.valid_manifest=)
two_ranks=(mpirun -np 2 --oversubscribe --mca mpi_yield_when_idle 1 -x MPIASR_EMU_DEVICES=2)
run_ok "$work/two_ranks.log" "${two_ranks[@]}" "$mpiasr" train "$tiny" "${options[@]}" \
  --output.dir="$work/two_ranks"
expect_line "$work/two_ranks.log" '^backend: cuda-bf16 .*device 0' "two ranks"
expect_line "$work/two_ranks.log" 'global batch = 2 ranks x 1 micro-batches' "two ranks"
run_ok "$work/zero.log" "${two_ranks[@]}" "$mpiasr" train "$tiny" "${options[@]}" \
  --distributed.zero_stage=1 --output.dir="$work/zero"
expect_line "$work/zero.log" '^optimizer: ZeRO-1, AdamW state sharded over 2 ranks' "ZeRO-1"
run_ok "$work/accumulation.log" "$mpiasr" train "$tiny" "${options[@]}" \
  --training.accumulation=2 --output.dir="$work/accumulation"
expect_line "$work/accumulation.log" 'global batch = 1 ranks x 2 micro-batches' "accumulation"
other_core="$(other_blas_core)"
[[ -n "$other_core" ]] || fail "no OpenBLAS core of another class for this CPU"
expect_blas_core "$mpiasr" "$other_core"
run_ok "$work/elsewhere.log" env OPENBLAS_CORETYPE="$other_core" OPENBLAS_NUM_THREADS=2 \
  OMP_NUM_THREADS=2 "$mpiasr" train "$tiny" "${options[@]}" --training.accumulation=2 \
  --training.threads=2 --output.dir="$work/elsewhere"
run_ok "$work/one_rank.log" "$mpiasr" train "$tiny" "${options[@]}" --output.dir="$work/one_rank"
for run in two_ranks zero accumulation elsewhere one_rank; do
  expect_line "$work/$run.log" '^training done: 2 steps' "$run"
done

PYTHONPATH="$(dirname "${BASH_SOURCE[0]}")/lib" /usr/bin/python3 - "$work" "$other_core" <<'EOF' || fail "the runs do not match (see above)"
import sys

from safetensors_f32 import max_relative_difference, tensors, train_losses

def losses(run):
    return train_losses(f"{sys.argv[1]}/{run}")

model = "checkpoints/step-00000002/model.safetensors"
two, zero, accumulated, elsewhere, single = (
    tensors(f"{sys.argv[1]}/{run}/{model}")
    for run in ("two_ranks", "zero", "accumulation", "elsewhere", "one_rank"))
same, name = max_relative_difference(accumulated, two)
moved, moved_name = max_relative_difference(elsewhere, accumulated)
other, _ = max_relative_difference(single, two)
sharded, sharded_name = max_relative_difference(zero, two)
print(f"{len(two)} tensors; 2 ranks vs 1 rank x accumulation 2: max relative difference "
      f"{same:.2e} ({name}); accumulation on OpenBLAS core {sys.argv[2]}, 2 threads, vs "
      f"the default core, 1 thread: {moved:.2e} ({moved_name}); vs 1 rank without "
      f"accumulation: {other:.2e}; ZeRO-1 vs ZeRO-0: {sharded:.2e} ({sharded_name})")
assert same == 0, "2 ranks and 1 rank x accumulation 2 differ"
assert moved == 0, "another BLAS core and thread count moved the emulator's result"
assert other > 1e-3, "1 rank without accumulation should differ: the check has no power"
assert sharded <= 1e-6, "ZeRO-1 and ZeRO-0 differ"

two_losses = losses("two_ranks")
assert [s for s, _ in two_losses] == [1, 2], two_losses
for run, limit in (("accumulation", 0), ("elsewhere", 0), ("zero", 1e-6)):
    theirs = losses(run)
    assert [s for s, _ in theirs] == [1, 2], (run, theirs)
    worst = max(abs(a - b) / abs(b) for (_, a), (_, b) in zip(theirs, two_losses))
    print(f"{run}: losses of steps 1-2 agree with 2 ranks' within {worst:.2e}")
    assert worst <= limit, (run, theirs, two_losses)
EOF
rm -rf "$work"
echo "train_nccl_emu: all checks passed"
