#!/usr/bin/env bash
# The emulated cluster network (scripts/fake-cluster-net.sh) and MPI over it
# (scripts/mpirun-fake-nodes.sh --net): two fake nodes in network namespaces,
# each with its own hostname, disk and 1 Gbit/s link each way.
#   1. the limit is in force: 32 MB sent from node1 to node2 over TCP take at
#      least 32 MB / 1 Gbit/s less one bucket of the token-bucket filter, and
#      no more than 4 times that;
#   2. the tests/mpi executables pass across the two nodes: one rank per node
#      (the flat ring all-reduce crosses the link) and two per node
#      (hierarchical: shared memory within a node, the leaders' ring across);
#   3. `mpiasr train` trains 6 steps across the two nodes, and the bytes node1
#      sent through its limited link (tc's counter) are at least what 6
#      gradient all-reduces of the model move (6 x its parameters x 4 bytes):
#      MPI's traffic went over the emulated network, nowhere else;
#   4. stop removes every namespace, and the root namespace's addresses and
#      routes are the same before, during and after.
# Prints SKIP and passes where network namespaces, veth pairs or the tbf
# qdisc are not permitted (not root, a container without CAP_NET_ADMIN, no
# sch_tbf): probed first with one namespace, made and deleted at once.
# Usage: bash mpi_cluster_net.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
net=mpiasr-ctest
skip() {
  echo "SKIP: $* (the emulated cluster network needs root, network namespaces, veth and tc tbf)"
  exit 0
}
[[ $(id -u) -eq 0 ]] || skip "not root"
for tool in ip tc nsenter; do command -v "$tool" >/dev/null || skip "no '$tool'"; done
probe=$( (ip netns add "$net-probe" &&
  ip -n "$net-probe" link add probe0 type veth peer name probe1 &&
  ip netns exec "$net-probe" tc qdisc add dev probe0 root tbf rate 1gbit burst 65536 limit 131072) 2>&1) ||
  probe_failed=1
ip netns delete "$net-probe" 2>/dev/null || true
((!${probe_failed:-0})) || skip "a namespace with a veth pair and a tbf qdisc could not be made: ${probe:-no message}"
train_setup "$1" "$2" mpi_cluster_net
for test in context_test gradient_reducer_test collectives_test; do
  [[ -x "$build_dir/$test" ]] || fail "$build_dir/$test not built"
done

net_script="$source_dir/scripts/fake-cluster-net.sh"
root_view() { ip -o addr show; ip route show; ip netns list | grep -v "^$net-" || true; }
root_before=$(root_view)
trap 'bash "$net_script" stop --name "$net"' EXIT
run_ok "$work/net.log" bash "$net_script" start 2 --rate 1gbit --name "$net"
cat "$work/net.log"
[[ "$(root_view)" == "$root_before" ]] || fail "starting the network changed the root namespace"
for ns in hub node1 node2; do [[ -e "/run/netns/$net-$ns" ]] || fail "no namespace $net-$ns"; done

# 1. 32 MB from node1 to node2: at 1 Gbit/s at least 268 ms less the bucket.
size=$((32 << 20))
ip netns exec "$net-node2" /usr/bin/python3 "$source_dir/scripts/net-transfer.py" receive 10.201.0.2 "$size" &
receiver=$!
seconds=$(ip netns exec "$net-node1" /usr/bin/python3 "$source_dir/scripts/net-transfer.py" send 10.201.0.2 "$size")
wait "$receiver"
burst=$(ip netns exec "$net-node1" tc qdisc show dev eth0 | sed -n 's/.*burst \([0-9]*\)b.*/\1/p')
/usr/bin/python3 - "$size" "$seconds" "$burst" <<'EOF' || fail "the transfer does not show the 1 Gbit/s limit"
import sys
size, seconds, burst = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
least = (size - burst) * 8 / 1e9
print(f"  {size >> 20} MB node1 -> node2 in {seconds * 1e3:.0f} ms "
      f"({size * 8 / seconds / 1e9:.2f} Gbit/s); the limit allows no less than {least * 1e3:.0f} ms")
assert least <= seconds <= 4 * least, (least, seconds)
EOF

# 2. The MPI tests across the nodes.
nodes="$work/nodes"
fake() {
  fake_nodes=("$source_dir/scripts/mpirun-fake-nodes.sh" --nodes 2 --ranks-per-node "$1"
    --nodes-root "$nodes" --node-disk "$work/node-disk" --net "$net")
}
fake 1
for test in context_test gradient_reducer_test collectives_test; do
  MPIASR_TEST_NODES=2 MPIASR_TEST_HOSTS=2 run_ok "$work/$test-1.log" "${fake_nodes[@]}" \
    "$build_dir/$test" --gtest_brief=1
done
fake 2
for test in context_test gradient_reducer_test; do
  MPIASR_TEST_NODES=2 MPIASR_TEST_HOSTS=2 run_ok "$work/$test-2.log" "${fake_nodes[@]}" \
    "$build_dir/$test" --gtest_brief=1
done
echo "  context, gradient reducer (flat and hierarchical) and collectives tests passed across the nodes"
[[ "$(root_view)" == "$root_before" ]] || fail "running over the network changed the root namespace"

# 3. Training across the nodes; the gradients crossed node1's limited link.
sent() { ip netns exec "$net-node1" tc -s qdisc show dev eth0 | sed -n 's/^ *Sent \([0-9]*\) bytes.*/\1/p'; }
sent_before=$(sent)
fake 1
run_ok "$work/train.log" "${fake_nodes[@]}" "$mpiasr" train "$tiny" "${tiny_options[@]}" \
  --data.valid_manifest= --training.max_steps=6 --training.log_every=3 --output.dir="$work/run" \
  --distributed.bucket_mb=0.25
expect_line "$work/train.log" '^mpiasr train: rank 0/2 \(node1\): local rank 0/1 on node 0/2' "topology"
expect_line "$work/train.log" '^training done: 6 steps' "train"
expect_line "$work/train.log" 'comm wait [0-9.]+ ms/step' "train"
parameters=$(sed -n 's/^model: \([0-9.]*\) M parameters.*/\1/p' "$work/train.log")
sent_after=$(sent)
/usr/bin/python3 - "$parameters" "$sent_before" "$sent_after" <<'EOF' ||
import sys
parameters, before, after = float(sys.argv[1]) * 1e6, int(sys.argv[2]), int(sys.argv[3])
least = 6 * (parameters - 5000) * 4  # the logged count is rounded to 10,000
print(f"  node1 sent {(after - before) / 1e6:.1f} MB through its link in training; "
      f"6 all-reduces of {parameters / 1e6:.2f} M parameters move at least {least / 1e6:.1f} MB")
assert after - before >= least
EOF
  fail "the gradient all-reduce did not cross node1's link"

# 4. Stop: the namespaces are gone, the root namespace is as it was.
bash "$net_script" stop --name "$net"
trap - EXIT
for ns in hub node1 node2; do [[ ! -e "/run/netns/$net-$ns" ]] || fail "$net-$ns left behind"; done
[[ "$(root_view)" == "$root_before" ]] || fail "the root namespace differs after stop"
echo "  stopped; the root namespace's addresses and routes unchanged throughout"
rm -rf "$work"
echo "mpi_cluster_net: all checks passed"
