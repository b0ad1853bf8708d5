#!/usr/bin/env bash
# NCCL's multi-rank paths on the CPU: nccl_test_emu (tests/cuda/nccl_test.cpp
# on the emulated CUDA runtime and NCCL, kernels/cuda_emu) under mpirun, every
# rank on an emulated device of its own (MPIASR_EMU_DEVICES):
#   1. every nccl_test case at 2 and at 4 ranks;
#   2. the bootstrap through MPI_Comm_split_type on 2 fake nodes of 2 ranks
#      (scripts/mpirun-fake-nodes.sh): node communicators of 2, each rank on
#      the device of its local rank;
#   3. 3 ranks on 2 devices: local ranks 0 and 2 would share a device, and
#      the job stops naming them and the device's PCI bus id;
#   4. faults injected by MPIASR_EMU_NCCL_FAULT: ncclInProgress from the init
#      and from each kind of collective is waited out and the sums are right;
#      an error from rank 1's third all-reduce ends the job with exit code 5
#      and a message naming the rank, the step and the call; a malformed
#      list is named;
#   5. rank 1 killed in its third all-reduce, with mpirun told to keep the
#      others running (--enable-recovery): rank 0's all-reduce gives up after
#      MPIASR_EMU_NCCL_TIMEOUT_S = 3 s and rank 0 ends through the abort path
#      (the reducer's message naming the call, ncclCommAbort, MPI_Abort)
#      within 30 s.
# Without the emulation build (MPIASR_CUDA_EMU=OFF) it prints SKIP and passes.
# Usage: bash nccl_emu.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
source "$source_dir/tests/integration/lib/mpi_checks.sh"
test="$build_dir/nccl_test_emu"
if [[ ! -x "$test" ]]; then
  echo "SKIP: $test not built (MPIASR_CUDA_EMU=OFF)"
  exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work="$build_dir/nccl_emu"
rm -rf "$work"
mkdir -p "$work"
# emu_mpirun NP ARGS...: mpirun ARGS on NP ranks, each process seeing NP devices.
emu_mpirun() {
  local ranks="$1"
  shift
  mpirun -np "$ranks" --oversubscribe --mca mpi_yield_when_idle 1 -x MPIASR_EMU_DEVICES="$ranks" \
    "$@"
}
# expect_in LOG PATTERN WHAT: LOG has a line matching the extended regex PATTERN.
expect_in() {
  grep -Eq "$2" "$1" || { tail -n 30 "$1" >&2; fail "$3: no line matching: $2"; }
}

# 1. Every case at 2 and 4 ranks.
for ranks in 2 4; do
  run_ok emu_mpirun "$ranks" "$test" --gtest_brief=1
done

# 2. Two fake nodes of two ranks: the node split, one device per local rank.
run_ok "$source_dir/scripts/mpirun-fake-nodes.sh" --nodes 2 --ranks-per-node 2 \
  --nodes-root "$work/nodes" --node-disk "$work/node-disk" -x MPIASR_EMU_DEVICES=2 \
  "$test" --gtest_brief=1 --gtest_filter='NcclBootstrap.*'

# 3. Three ranks on two devices.
rc=0
mpirun -np 3 --oversubscribe -x MPIASR_EMU_DEVICES=2 "$test" --gtest_brief=1 \
  --gtest_filter=NcclBootstrap.SelectsTheDeviceOfItsLocalRank >"$work/shared.log" 2>&1 || rc=$?
((rc != 0)) || fail "3 ranks on 2 devices did not fail"
expect_in "$work/shared.log" "local ranks 0 and 2 would share the GPU at PCI 0000:01:00.0" \
  "3 ranks on 2 devices"
echo "3 ranks on 2 devices: $(grep -m1 -o 'local ranks 0 and 2 would share.*00.0' "$work/shared.log")"

# 4. Injected faults. ncclInProgress, then polled until done, on every rank.
faults=init:1:inprogress,allreduce:1:inprogress,reducescatter:2:inprogress,allgather:3:inprogress
MPIASR_EMU_NCCL_FAULT="$faults" emu_mpirun 2 -x MPIASR_EMU_NCCL_FAULT "$test" --gtest_brief=1 \
  --gtest_filter='NcclGradientReducer.Sharded*' >"$work/inprogress.log" 2>&1 ||
  { tail -n 30 "$work/inprogress.log" >&2; fail "ncclInProgress was not waited out"; }
injected=$(grep -c "injected fault 'inprogress'" "$work/inprogress.log" || true)
((injected == 8)) || fail "ncclInProgress: $injected faults injected, expected 4 on each of 2 ranks"
echo "ncclInProgress from init, all-reduce, reduce-scatter and all-gather: waited out on 2 ranks"

# An error on rank 1.
rc=0
MPIASR_EMU_NCCL_FAULT=allreduce:3:error@1 emu_mpirun 2 -x MPIASR_EMU_NCCL_FAULT "$test" \
  --gtest_filter='NcclGradientReducer.SumsEvery*' >"$work/error.log" 2>&1 || rc=$?
((rc == 5)) || { tail -n 30 "$work/error.log" >&2; fail "injected error: exit code $rc, not 5"; }
expect_in "$work/error.log" \
  '^rank 1: step 0: gradient all-reduce \(NCCL, world communicator\): unhandled system error' \
  "injected error"
echo "injected error: $(grep -m1 '^rank 1: step 0: gradient all-reduce' "$work/error.log")"

# A malformed list.
rc=0
MPIASR_EMU_NCCL_FAULT=allreduce:0:error "$test" --gtest_filter='NcclBootstrap.WorldAnd*' \
  >"$work/malformed.log" 2>&1 || rc=$?
((rc != 0)) || fail "a malformed MPIASR_EMU_NCCL_FAULT was accepted"
expect_in "$work/malformed.log" 'MPIASR_EMU_NCCL_FAULT entry "allreduce:0:error" is not CALL:N:KIND' \
  "malformed list"
expect_in "$work/malformed.log" 'ncclCommInitRankConfig \(NCCL, world communicator\): invalid argument' \
  "malformed list"

# 5. Rank 1 dies in an all-reduce; rank 0 must leave through the abort path.
start=$(now_ms)
rc=0
MPIASR_EMU_NCCL_FAULT=allreduce:3:kill@1 MPIASR_EMU_NCCL_TIMEOUT_S=3 \
  timeout 60 mpirun -np 2 --oversubscribe --enable-recovery -x MPIASR_EMU_DEVICES=2 \
  -x MPIASR_EMU_NCCL_FAULT -x MPIASR_EMU_NCCL_TIMEOUT_S "$test" \
  --gtest_filter='NcclGradientReducer.SumsEvery*' >"$work/killed.log" 2>&1 || rc=$?
took_ms=$(($(now_ms) - start))
((rc != 124)) || { tail -n 30 "$work/killed.log" >&2; fail "killed rank: still running after 60 s"; }
((took_ms <= 30000)) || fail "killed rank: the job took $took_ms ms, more than 30 s"
expect_in "$work/killed.log" "world rank 1: allreduce call 3: injected fault 'kill'" "killed rank"
expect_in "$work/killed.log" \
  '^emulated NCCL: rank 0 of 2: all-reduce: nothing from rank 1 \(world rank 1\) within 3 s' \
  "killed rank"
expect_in "$work/killed.log" \
  '^rank 0: step 0: gradient all-reduce \(NCCL, world communicator\): remote process exited' \
  "killed rank"
echo "killed rank: rank 0 ended through the abort path after $took_ms ms:"
grep -m1 '^rank 0: step 0: gradient all-reduce' "$work/killed.log"
rm -rf "$work"
echo "nccl_emu: all passed"
