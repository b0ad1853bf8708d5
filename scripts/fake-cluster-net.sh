#!/usr/bin/env bash
# An emulated cluster network on this one machine: fake nodes in network
# namespaces, each joined to a switch by its own link with a bandwidth limit
# each way, as 1 Gbit/s Ethernet ports on a switch would be.
#
#   scripts/fake-cluster-net.sh start N [--rate RATE] [--name NAME] [--subnet A.B.C]
#   scripts/fake-cluster-net.sh stop [--name NAME]
#   scripts/fake-cluster-net.sh show [--name NAME]
#
#   N         fake nodes node1..nodeN (1 to 200)
#   --rate    the limit of every link in each direction, in tc's units
#             (default 1gbit; e.g. 100mbit, 10gbit)
#   --name    the namespaces' prefix (default mpiasr-net); several networks of
#             different names may exist at once
#   --subnet  the first three bytes of the private /24 inside the namespaces
#             (default 10.201.0): node K is .K, the switch's own address .254
#
# What `start` makes, all of it inside namespaces that it creates (the root
# namespace's interfaces, addresses and routes are never touched):
#   NAME-hub     the switch: a bridge br0 with address .254 (where mpirun
#                runs, see scripts/mpirun-fake-nodes.sh --net), and one port
#                nodeK per node
#   NAME-nodeK   node K: loopback and eth0 (address .K), a veth pair with the
#                hub's port nodeK
# Each link has a token-bucket filter (tc tbf) on both ends: on the node's
# eth0 (what the node sends) and on the hub's nodeK (what it receives), so
# every node sends and receives at most RATE, and a transfer between two
# nodes crosses two limited ports, as through a switch. There is no added
# delay: netem is not available on these machines; a veth hop costs some
# microseconds. `stop` deletes the namespaces, which deletes everything in
# them. `show` prints the links and their qdiscs.
#
# Processes join a node's network with
#   nsenter --net=/run/netns/NAME-nodeK COMMAND
# which scripts/fake-node-rsh does for mpirun (MPIASR_FAKE_NET=NAME) on top of
# the node's own hostname and disk. Needs root.
set -euo pipefail
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "fake-cluster-net.sh: $*" >&2; exit 2; }

(($# > 0)) || { usage >&2; exit 2; }
command="$1"
shift
nodes=""
rate=1gbit
name=mpiasr-net
subnet=10.201.0
if [[ "$command" == start ]]; then
  (($# > 0)) || die "start: give the number of nodes"
  nodes="$1"
  shift
fi
while (($# > 0)); do
  case "$1" in
    --rate) rate="$2"; shift 2 ;;
    --name) name="$2"; shift 2 ;;
    --subnet) subnet="$2"; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$name" =~ ^[a-z][a-z0-9-]{0,30}$ ]] || die "--name '$name': use 1-31 of [a-z0-9-], starting with a letter"
hub="$name-hub"

stop() {
  local ns
  for ns in $(ip netns list | cut -d' ' -f1); do
    if [[ "$ns" == "$hub" || "$ns" =~ ^$name-node[0-9]+$ ]]; then ip netns delete "$ns"; fi
  done
}

case "$command" in
  start) ;;
  stop) stop; exit 0 ;;
  show)
    ip netns list | cut -d' ' -f1 | grep -qx "$hub" || die "no network '$name' (start it first)"
    for ns in $(ip netns list | cut -d' ' -f1 | grep -E "^($hub|$name-node[0-9]+)$" | sort -V); do
      echo "== $ns"
      ip -n "$ns" -4 -br addr show
      ip netns exec "$ns" tc qdisc show | grep tbf || true
    done
    exit 0 ;;
  -h | --help) usage; exit 0 ;;
  *) die "unknown command '$command' (start, stop or show)" ;;
esac

[[ "$nodes" =~ ^[1-9][0-9]*$ ]] && ((nodes <= 200)) || die "start: '$nodes' nodes: give 1 to 200"
[[ "$subnet" =~ ^(10\.[0-9]{1,3}\.[0-9]{1,3}|192\.168\.[0-9]{1,3}|172\.(1[6-9]|2[0-9]|3[01])\.[0-9]{1,3})$ ]] ||
  die "--subnet '$subnet': give the first three bytes of a private /24 (10.x.y, 172.16-31.y, 192.168.y)"
[[ "$rate" =~ ^[0-9]+(\.[0-9]+)?([kmg]?bit|[kmg]?bps)$ ]] || die "--rate '$rate': give a tc rate such as 1gbit or 100mbit"
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, tc)"
for tool in ip tc nsenter; do command -v "$tool" >/dev/null || die "no '$tool' (bash scripts/install-deps.sh)"; done

# Start from nothing: an earlier network of this name goes first.
stop
trap 'stop' ERR

# The bucket: at least 1 ms of traffic at the rate (rounded up to 64 KiB) so
# the tbf keeps pace with TCP's bursts; the queue holds 5 ms of traffic, as a
# switch port's buffer would.
case "$rate" in
  *gbit) bits_per_second=$(awk -v r="${rate%gbit}" 'BEGIN { print r * 1e9 }') ;;
  *mbit) bits_per_second=$(awk -v r="${rate%mbit}" 'BEGIN { print r * 1e6 }') ;;
  *kbit) bits_per_second=$(awk -v r="${rate%kbit}" 'BEGIN { print r * 1e3 }') ;;
  *gbps) bits_per_second=$(awk -v r="${rate%gbps}" 'BEGIN { print r * 8e9 }') ;;
  *mbps) bits_per_second=$(awk -v r="${rate%mbps}" 'BEGIN { print r * 8e6 }') ;;
  *kbps) bits_per_second=$(awk -v r="${rate%kbps}" 'BEGIN { print r * 8e3 }') ;;
  *bit) bits_per_second="${rate%bit}" ;;
  *bps) bits_per_second=$(awk -v r="${rate%bps}" 'BEGIN { print r * 8 }') ;;
esac
burst=$(awk -v b="$bits_per_second" 'BEGIN { x = b / 8 / 1000; k = 65536; print (x > k ? int((x + k - 1) / k) * k : k) }')
queue=$(awk -v b="$bits_per_second" -v burst="$burst" 'BEGIN { q = int(b / 8 * 0.005); print (q > 2 * burst ? q : 2 * burst) }')
limit() { ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$rate" burst "$burst" limit "$queue"; }

ip netns add "$hub"
ip -n "$hub" link set lo up
ip -n "$hub" link add br0 type bridge
ip -n "$hub" addr add "$subnet.254/24" dev br0
ip -n "$hub" link set br0 up
for ((k = 1; k <= nodes; ++k)); do
  node="$name-node$k"
  ip netns add "$node"
  ip -n "$node" link set lo up
  ip -n "$hub" link add "node$k" type veth peer name eth0 netns "$node"
  ip -n "$hub" link set "node$k" master br0 up
  ip -n "$node" addr add "$subnet.$k/24" dev eth0
  ip -n "$node" link set eth0 up
  limit "$node" eth0
  limit "$hub" "node$k"
done
trap - ERR
echo "fake-cluster-net: $nodes nodes in namespaces $name-node1..$nodes, $subnet.1-$nodes/24," \
  "switch $hub ($subnet.254), $rate each way per node (tbf burst $burst B, queue $queue B)"
