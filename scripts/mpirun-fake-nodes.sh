#!/usr/bin/env bash
# Runs an MPI program on fake nodes of this one machine: each node has its own
# hostname (so MPI sees separate nodes) and its own disk at $NODE_DISK (so
# per-node files really are per node). See scripts/fake-node-rsh.
#
#   scripts/mpirun-fake-nodes.sh [--nodes N] [--ranks-per-node R]
#       [--nodes-root DIR] [--node-disk DIR] [--net NAME] [MPIRUN_OPTIONS...]
#       PROGRAM [ARGS...]
#
#   --nodes N           fake nodes node1..nodeN (default 2)
#   --ranks-per-node R  ranks on each node (default 2)
#   --nodes-root DIR    holds each node's disk as DIR/nodeK (default
#                       $NODES_ROOT, else /tmp/mpiasr-fake-nodes)
#   --node-disk DIR     where each node sees its own disk (default $NODE_DISK,
#                       else /tmp/mpiasr-node-disk)
#   --net NAME          run over the emulated cluster network NAME
#                       (scripts/fake-cluster-net.sh start N --name NAME, with
#                       N >= --nodes): node K's processes join namespace
#                       NAME-nodeK, mpirun itself runs on the switch
#                       (NAME-hub), and MPI talks TCP over the network's
#                       subnet only (btl self,vader,tcp and oob tcp restricted
#                       to it), so traffic between nodes crosses the
#                       rate-limited links; ranks of one node share memory.
# Everything after these options goes to mpirun as it is, e.g.
#   scripts/mpirun-fake-nodes.sh --nodes 2 -x OMP_NUM_THREADS=1 build/mpiasr train cfg.yaml
#
# Ranks are placed by slot (node1 gets ranks 0..R-1). The fake nodes share
# the real cores, so MPI is told to yield when idle: without it, ranks that
# busy-poll starve each other and a barrier takes ~100 ms instead of ~0.1 ms.
# For the same reason ranks are not bound to cores: each node's daemon would
# bind its first rank to core 0, and with 2 ranks in all (OpenMPI binds to
# cores up to 2 ranks) both then ran on core 0 while core 1 idled: 2 fake
# nodes of 1 rank took 2.05x the time of the same work unbound. Nor is each
# node bound to a core of its own: 4 nodes of 1 rank, two to a core, then
# stepped 1.21x slower than unbound (measured for commit 44bcac5).
# Needs root for the namespaces; as root, mpirun's root check is waived here.
set -euo pipefail
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
nodes=2
ranks_per_node=2
nodes_root="${NODES_ROOT:-/tmp/mpiasr-fake-nodes}"
node_disk="${NODE_DISK:-/tmp/mpiasr-node-disk}"
net=""
while (($# > 0)); do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --ranks-per-node) ranks_per_node="$2"; shift 2 ;;
    --nodes-root) nodes_root="$2"; shift 2 ;;
    --node-disk) node_disk="$2"; shift 2 ;;
    --net) net="$2"; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
  esac
done
(($# > 0)) || { echo "mpirun-fake-nodes.sh: no program given (see --help)" >&2; exit 2; }
[[ "$nodes" =~ ^[1-9][0-9]*$ ]] || { echo "mpirun-fake-nodes.sh: --nodes '$nodes' is not a positive number" >&2; exit 2; }
[[ "$ranks_per_node" =~ ^[1-9][0-9]*$ ]] || { echo "mpirun-fake-nodes.sh: --ranks-per-node '$ranks_per_node' is not a positive number" >&2; exit 2; }

hosts=()
for ((k = 1; k <= nodes; ++k)); do
  hosts+=("node$k:$ranks_per_node")
  mkdir -p "$nodes_root/node$k"
done
mkdir -p "$node_disk"
export NODES_ROOT="$nodes_root" NODE_DISK="$node_disk"
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
host_list=$(IFS=,; echo "${hosts[*]}")
launch=(mpirun)
if [[ -n "$net" ]]; then
  [[ -e "/run/netns/$net-hub" ]] ||
    { echo "mpirun-fake-nodes.sh: no network '$net' (scripts/fake-cluster-net.sh start $nodes --name $net)" >&2; exit 2; }
  [[ -e "/run/netns/$net-node$nodes" ]] ||
    { echo "mpirun-fake-nodes.sh: network '$net' has fewer than $nodes nodes" >&2; exit 2; }
  # The switch's address on br0, e.g. 10.201.0.254/24: the network is 10.201.0.0/24.
  switch=$(ip -n "$net-hub" -4 -o addr show dev br0 | awk '{ print $4 }')
  subnet="${switch%.*/*}.0/${switch#*/}"
  export MPIASR_FAKE_NET="$net"
  launch=(nsenter "--net=/run/netns/$net-hub" mpirun --mca btl self,vader,tcp
    --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet")
fi
exec "${launch[@]}" --host "$host_list" -np $((nodes * ranks_per_node)) \
  --mca plm_rsh_agent "$script_dir/fake-node-rsh" --mca mpi_yield_when_idle 1 --bind-to none \
  -x NODES_ROOT -x NODE_DISK "$@"
