#!/usr/bin/env bash
# The job step of scripts/slurm/train.sbatch: one mpiasr rank per Slurm task,
# wired up by PMIx (the only srun MPI plugin that works with Debian's OpenMPI;
# pmi2 and none do not):
#
#   srun --mpi=pmix --kill-on-bad-exit=1 mpiasr train CONFIG [overrides...]
#
# Run it inside an allocation (sbatch, salloc). Environment: MPIASR_ROOT
# (repository, default: this script's ../..), MPIASR_BIN (the program,
# default MPIASR_ROOT/build/mpiasr), MPIASR_SRUN_OPTIONS (extra srun options,
# e.g. "--overcommit" to run more tasks than CPUs).
#
# When a rank dies: --kill-on-bad-exit=1 makes srun end the whole step as soon
# as any task exits non-zero or is killed. (Even without it, OpenMPI's PMIx
# error handler aborts the other ranks when a peer is lost; measured on the
# fake cluster, a SIGKILLed rank ends the step within ~2 s either way.) A rank
# that hangs instead of dying is caught by mpiasr's collective timeout, which
# calls MPI_Abort: srun then cancels the step and exits with code 5.
set -euo pipefail
root="${MPIASR_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
bin="${MPIASR_BIN:-$root/build/mpiasr}"
[[ -x "$bin" ]] || { echo "train-step.sh: no program at $bin (build it, or set MPIASR_BIN)" >&2; exit 1; }
(($# > 0)) || { echo "train-step.sh: usage: train-step.sh CONFIG.yaml [overrides...]" >&2; exit 2; }
read -r -a extra <<<"${MPIASR_SRUN_OPTIONS:-}"
exec srun --mpi=pmix --kill-on-bad-exit=1 "${extra[@]}" "$bin" train "$@"
