#!/usr/bin/env bash
# Multi-rank runs of the tests/mpi executables under plain mpirun on this
# machine (one node): 4 ranks (and 2 and 3 for the gradient reducer), then the
# failure scenarios of failure_test: a rank that skips a collective makes
# every rank exit with code 5 within the timeout plus a margin, with a message
# naming rank, step and operation; a rank killed by SIGKILL ends the job fast.
# Usage: bash mpi_ranks.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
source "$(cd "$2" && pwd)/tests/integration/lib/mpi_checks.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
require_tests "$build_dir"

for test in "${mpi_tests[@]}"; do
  MPIASR_TEST_NODES=1 MPIASR_TEST_HOSTS=1 run_ok mpirun -np 4 --oversubscribe "$build_dir/$test" --gtest_brief=1
done
run_ok mpirun -np 2 "$build_dir/gradient_reducer_test" --gtest_brief=1
run_ok mpirun -np 3 --oversubscribe "$build_dir/gradient_reducer_test" --gtest_brief=1
run_ok mpirun -np 3 --oversubscribe "$build_dir/checkpoint_writers_test" --gtest_brief=1

launch=(mpirun -np 4 --oversubscribe)
expect_timeout_abort "$build_dir" 3 "loss all-reduce" 7 "${launch[@]}"
expect_timeout_abort "$build_dir" 3 "gradient all-reduce" 12 "${launch[@]}"
expect_kill_ends_job "$build_dir" 15 "${launch[@]}"
echo "mpi_ranks: all passed"
