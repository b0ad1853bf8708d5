# shellcheck shell=bash
# Checks shared by the MPI integration scripts (tests/integration/mpi_*.sh),
# which source this file; it sits in lib/ so ctest does not run it as a test.
# The failure checks take the launcher command (mpirun ... or srun ...) as
# their last arguments.

export GTEST_COLOR=no

mpi_tests=(context_test run_on_test broadcast_test agreement_test collectives_test
  gradient_reducer_test checkpoint_writers_test)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

require_tests() {
  local test
  for test in "${mpi_tests[@]}" failure_test; do
    [[ -x "$1/$test" ]] || fail "$1/$test not built (cmake --build $1 --target $test)"
  done
}

# run_ok COMMAND...: runs it, prints its output on failure.
run_ok() {
  echo "+ $*"
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    fail "$* exited non-zero"
  fi
  tail -n 2 "$log"
  rm -f "$log"
}

now_ms() { date +%s%3N; }

# expect_timeout_abort BUILD TIMEOUT OP STEP RANKS LAUNCHER...: of RANKS
# ranks, the last one skips the collective OP at step STEP; the job must exit
# with code 5 (MPI_Abort with kDistributed) within TIMEOUT + 15 s, and some
# rank must print "rank R: step STEP: OP did not finish within TIMEOUT s;
# waiting for rank LAST (host): no answer ..." and no other rank (the others
# wait in OP too and say so when asked). OP "elsewhere": the last rank
# waits in 'checkpoint write' while the others are in 'loss all-reduce', and
# either side names the other's collective.
expect_timeout_abort() {
  local build_dir="$1" timeout="$2" op="$3" step="$4" last=$(($5 - 1))
  shift 5
  local scenario=timeout filter=Failure.RankMissingACollectiveAbortsTheJob
  local within="did not finish within $timeout s"
  local line="^rank [0-9]+: step $step: $op $within; waiting for rank $last \\([^)]*\\): no answer within 2 s \\(stopped, or busy outside any collective since 'start' at step $step\\)$"
  if [[ "$op" == "gradient all-reduce" ]]; then
    scenario=reducer_timeout filter=Failure.RankMissingTheGradientReductionAbortsTheJob
  elif [[ "$op" == elsewhere ]]; then
    scenario=elsewhere filter=Failure.RankInAnotherCollectiveIsNamedWithIt
    line="^rank [0-9]+: step $step: loss all-reduce $within; waiting for rank $last \\([^)]*\\): in 'checkpoint write' at step $step\$"
    line+="|^rank $last: step $step: checkpoint write $within; waiting for rank 0 \\([^)]*\\): in 'loss all-reduce' at step $step;"
  fi
  echo "+ MPIASR_TEST_FAILURE=$scenario $* failure_test"
  local log start rc=0 took_ms
  log=$(mktemp)
  start=$(now_ms)
  MPIASR_TEST_FAILURE=$scenario MPIASR_TEST_TIMEOUT=$timeout \
    timeout 120 "$@" "$build_dir/failure_test" --gtest_filter="$filter" >"$log" 2>&1 || rc=$?
  took_ms=$(($(now_ms) - start))
  if ((rc != 5)) || ! grep -Eq "$line" "$log" || ((took_ms > (timeout + 15) * 1000)); then
    cat "$log" >&2
    rm -f "$log"
    fail "$scenario: exit code $rc (expected 5) after $took_ms ms (limit $timeout + 15 s); no line matching: $line"
  fi
  grep -E "did not finish" "$log" | head -n 1
  echo "  exit code $rc after $took_ms ms"
  rm -f "$log"
}

# expect_kill_ends_job BUILD LIMIT LAUNCHER...: the last rank dies of SIGKILL
# while the others wait in an all-reduce (timeout 300 s); the launcher must
# end the job with a non-zero code within LIMIT seconds.
expect_kill_ends_job() {
  local build_dir="$1" limit="$2"
  shift 2
  echo "+ MPIASR_TEST_FAILURE=kill $* failure_test"
  local log start rc=0 took_ms
  log=$(mktemp)
  start=$(now_ms)
  MPIASR_TEST_FAILURE="kill" timeout 120 "$@" "$build_dir/failure_test" \
    --gtest_filter=Failure.KilledRankEndsTheJob >"$log" 2>&1 || rc=$?
  took_ms=$(($(now_ms) - start))
  if ((rc == 0 || rc == 124 || took_ms > limit * 1000)); then
    cat "$log" >&2
    rm -f "$log"
    fail "kill: exit code $rc after $took_ms ms (expected non-zero within $limit s)"
  fi
  echo "  exit code $rc after $took_ms ms"
  rm -f "$log"
}
