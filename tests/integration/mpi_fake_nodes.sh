#!/usr/bin/env bash
# The tests/mpi executables on two fake nodes of two ranks each
# (scripts/mpirun-fake-nodes.sh: own hostname and own disk per node): two node
# communicators with local ranks 0,1 on each and two hostnames; a file written
# once per node lands on each node's disk only; broadcast_file reaches the
# node that did not make the file and refreshes a stale copy; per-node mode
# has 2 checkpoint writers, shared mode 1; resume falls back to the newest
# step both nodes have; hierarchical all-reduce across nodes. Then three
# nodes of one rank, and the failure scenarios across nodes.
# Usage: bash mpi_fake_nodes.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
source "$source_dir/tests/integration/lib/mpi_checks.sh"
require_tests "$build_dir"
[[ $(id -u) -eq 0 ]] || fail "fake nodes need root (UTS and mount namespaces)"

work="$build_dir/mpi_fake_nodes"
rm -rf "$work"
mkdir -p "$work"
# fake_nodes NODES RANKS: the launcher command for NODES fake nodes of RANKS.
fake_nodes() {
  launcher=("$source_dir/scripts/mpirun-fake-nodes.sh" --nodes "$1" --ranks-per-node "$2"
    --nodes-root "$work/nodes" --node-disk "$work/node-disk")
}

fake_nodes 2 2
for test in "${mpi_tests[@]}"; do
  MPIASR_TEST_NODES=2 MPIASR_TEST_HOSTS=2 run_ok "${launcher[@]}" "$build_dir/$test" --gtest_brief=1
done
fake_nodes 3 1
for test in context_test checkpoint_writers_test broadcast_test; do
  MPIASR_TEST_NODES=3 MPIASR_TEST_HOSTS=3 run_ok "${launcher[@]}" "$build_dir/$test" --gtest_brief=1
done

# The disks stayed apart: each node's folder exists and the shared mount point
# itself received nothing.
for node in node1 node2 node3; do [[ -d "$work/nodes/$node" ]] || fail "no disk for $node"; done
[[ -z "$(ls -A "$work/node-disk")" ]] || fail "files written to the mount point itself: $(ls -A "$work/node-disk")"

fake_nodes 2 2
expect_timeout_abort "$build_dir" 3 "loss all-reduce" 7 4 "${launcher[@]}"
expect_kill_ends_job "$build_dir" 15 "${launcher[@]}"
rm -rf "$work"
echo "mpi_fake_nodes: all passed"
