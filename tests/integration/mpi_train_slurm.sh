#!/usr/bin/env bash
# `mpiasr train` under a real Slurm cluster of two fake nodes
# (scripts/fake-slurm-cluster.sh, on ports 17200+ so it stays apart from
# mpi_slurm.sh's; stopped on exit whatever happens):
#   1. the two-script pattern, sbatch scripts/slurm/train.sbatch ->
#      train-step.sh -> srun --mpi=pmix, 2 nodes x 2 tasks: the job completes
#      6 steps with a checkpoint every 3, and the ranks see two nodes of two;
#   2. the step script alone in an allocation (salloc ... train-step.sh):
#      training resumes from step 6 and completes 10 steps.
# Usage: bash mpi_train_slurm.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" mpi_train_slurm
[[ $(id -u) -eq 0 ]] || fail "the fake Slurm cluster needs root"

cluster="$work/cluster"
export FAKE_SLURM_PORT=17200 SLURM_CONF="$cluster/slurm.conf"
stop_cluster() {
  if [[ -f "$SLURM_CONF" ]]; then
    scancel --quiet --user=root 2>/dev/null || true
    bash "$source_dir/scripts/fake-slurm-cluster.sh" stop "$cluster" >/dev/null 2>&1 || true
  fi
}
trap stop_cluster EXIT
bash "$source_dir/scripts/fake-slurm-cluster.sh" start "$cluster" 2 >"$work/cluster.log" ||
  { cat "$work/cluster.log"; fail "the fake Slurm cluster did not start"; }

export MPIASR_ROOT="$source_dir" MPIASR_BIN="$mpiasr"
options=("${tiny_options[@]}" --data.valid_manifest= --checkpoint.every_steps=3
  --checkpoint.keep_last=3 --training.log_every=1 --output.dir="$work/run")

# 1. sbatch -> train.sbatch -> train-step.sh -> srun --mpi=pmix.
rc=0
echo "+ sbatch --wait -N2 --ntasks-per-node=2 scripts/slurm/train.sbatch tiny.yaml ... --training.max_steps=6"
(cd "$work" && timeout 120 sbatch --wait --quiet -N2 --ntasks-per-node=2 -o "$work/job-%j.out" \
  "$source_dir/scripts/slurm/train.sbatch" "$tiny" "${options[@]}" --training.max_steps=6) || rc=$?
cat "$work"/job-*.out >"$work/sbatch.log"
((rc == 0)) || { tail -n 30 "$work/sbatch.log" >&2; fail "the sbatch job exited with $rc"; }
expect_line "$work/sbatch.log" '^mpiasr-train: job [0-9]+: 2 nodes' "train.sbatch"
expect_line "$work/sbatch.log" '^mpiasr train: rank 0/4 .*: local rank 0/2 on node 0/2' "topology"
expect_line "$work/sbatch.log" '^training done: 6 steps' "sbatch"
for step in 00000003 00000006; do
  [[ -s "$work/run/checkpoints/step-$step/model.safetensors" ]] || fail "sbatch: no checkpoint step-$step"
done
grep -E '^(mpiasr train:|training done)' "$work/sbatch.log"

# 2. salloc + train-step.sh: resume from step 6, train to 10.
run_ok "$work/salloc.log" salloc --quiet -N2 --ntasks-per-node=2 \
  bash "$source_dir/scripts/slurm/train-step.sh" "$tiny" "${options[@]}" --training.max_steps=10
expect_line "$work/salloc.log" "^resumed from $work/run/checkpoints/step-00000006: step 6," "resume"
first_step=$(sed -n 's|^step \([0-9]*\)/10 .*|\1|p' "$work/salloc.log" | head -n 1)
((first_step == 7)) || fail "resume: the first step trained is ${first_step:-none}, not 7"
expect_line "$work/salloc.log" '^training done: 10 steps' "salloc"
grep -E '^(resumed from|training done)' "$work/salloc.log"
echo "mpi_train_slurm: all checks passed"
