#!/usr/bin/env bash
# The tests/mpi executables under a real Slurm cluster of two fake nodes
# (scripts/fake-slurm-cluster.sh, stopped on exit whatever happens), launched
# by srun --mpi=pmix -N2 -n4.
#
# What Slurm's fake nodes give, measured and asserted here: PMIx tells OpenMPI
# which node each task is on, so MPI_COMM_TYPE_SHARED yields TWO node
# communicators of two ranks each (ranks 0,1 on n1 and 2,3 on n2), although
# all four ranks report the machine's one hostname (MPIASR_TEST_HOSTS=1) and
# share one filesystem. Also checked: a rank killed by SIGKILL under
# srun --kill-on-bad-exit=1 ends the step within seconds; a collective
# timeout ends it with exit code 5; and the two-script pattern
# (sbatch scripts/slurm/train.sbatch -> train-step.sh -> srun) runs, with
# MPIASR_BIN pointing at the topology test instead of the trainer.
# Usage: bash mpi_slurm.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
source "$source_dir/tests/integration/lib/mpi_checks.sh"
require_tests "$build_dir"
[[ $(id -u) -eq 0 ]] || fail "the fake Slurm cluster needs root"

work="$build_dir/mpi_slurm"
cluster="$work/cluster"
rm -rf "$work"
mkdir -p "$work"
trap 'bash "$source_dir/scripts/fake-slurm-cluster.sh" stop "$cluster" >/dev/null 2>&1 || true' EXIT
bash "$source_dir/scripts/fake-slurm-cluster.sh" start "$cluster" 2
export SLURM_CONF="$cluster/slurm.conf"

launcher=(srun --mpi=pmix -N2 -n4)
MPIASR_TEST_NODES=2 MPIASR_TEST_HOSTS=1 run_ok "${launcher[@]}" "$build_dir/context_test" --gtest_brief=1
for test in run_on_test broadcast_test gradient_reducer_test checkpoint_writers_test; do
  run_ok "${launcher[@]}" "$build_dir/$test" --gtest_brief=1
done

expect_timeout_abort "$build_dir" 3 "loss all-reduce" 7 4 "${launcher[@]}"
expect_kill_ends_job "$build_dir" 15 srun --mpi=pmix --kill-on-bad-exit=1 -N2 -n4

# sbatch -> train.sbatch -> train-step.sh -> srun, run to completion.
echo "+ sbatch --wait -N2 --ntasks-per-node=2 scripts/slurm/train.sbatch (MPIASR_BIN=context_test)"
rc=0
(cd "$work" && MPIASR_ROOT="$source_dir" MPIASR_BIN="$build_dir/context_test" \
  MPIASR_TEST_NODES=2 MPIASR_TEST_HOSTS=1 \
  sbatch --wait --quiet -N2 --ntasks-per-node=2 -o "$work/job-%j.out" \
  "$source_dir/scripts/slurm/train.sbatch" config.yaml --gtest_brief=1) || rc=$?
job_out=$(cat "$work"/job-*.out)
echo "$job_out" | tail -n 3
((rc == 0)) || fail "sbatch job exited $rc: $job_out"
grep -q "mpiasr-train: job .*: 2 nodes" <<<"$job_out" || fail "train.sbatch did not report its allocation"
grep -q "PASSED" <<<"$job_out" || fail "the step did not run the program: $job_out"
echo "mpi_slurm: all passed"
