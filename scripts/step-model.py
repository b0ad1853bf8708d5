#!/usr/bin/python3
"""step-model: one data-parallel training step as events, and how it scales
(docs/scaling.md, "Past one machine, predicted").

  scripts/step-model.py --timeline METRICS.jsonl [--skip K] [--no-spread]
      [--compute-scale K] --system cpu-10g [--bucket-mb B]... [--png OUT.png]
  scripts/step-model.py --gpu ROOFLINE.json --system h200 [--bucket-mb B]... [--png OUT.png]
  scripts/step-model.py validate --timeline METRICS.jsonl --skip K --nodes N \\
      --ranks-per-node R --inter-measured-gbit RATE --bucket-mb B [--algorithm mpi-hier]

The first two print, for 1, 2, 4 ... --max-ranks ranks, a table of the step
for each all-reduce (--algorithm), wire (--wire) and bucket size, and where
efficiency first falls below 90%; validate prints, as JSON, the recorded
run's own step time and exposed all-reduce against the model's prediction
of them at its ranks and link (scripts/bench-scaling.sh --validate).

The step of one rank: data (the batch and the token count), forward and
backward, the wait in the gradient all-reduce, the optimizer. Backward makes
the gradients final from the last layer to the first; the buffer is cut from
its end into buckets as mpi/bucket_plan.h cuts it (a first bucket, then equal
ones, the rest last), and a bucket's all-reduce may start once all its bytes
are ready and every earlier bucket was handed out. Where the ready times come
from:
  --timeline  a run recorded with output.timeline (CPU): the median over steps
              and ranks of each recorded bucket's ready time, as a curve of
              bytes ready against time; data, forward + backward and optimizer
              their medians; the audio of a rank's step from the train lines;
              the ranks' spread, each rank's forward + backward less the
              step's mean over ranks
  --gpu       the roofline of a step on an H200, as
              build/roofline_timeline_bench --preset=NAME prints it
              (model/bench/roofline_timeline_bench.cu): forward + backward
              and the optimizer at their roofline bounds, each range of
              gradients ready at the bound of the work queued before it; no
              spread between ranks
Each link is a latency plus bytes over a bandwidth (the latency of one hop
or round, the bandwidth the rank's or node's share of the link). A bucket of
S bytes on the wire (S = 4 bytes a gradient, 2 with a 16-bit wire) over N
ranks, G a node, M = N / G nodes:
  mpi-flat   the MPI reducer's ring over all ranks in rank order
             (mpi/gradient_reducer.h): 2 (N - 1) rounds of S / N each, each
             round ended by the slowest link (the network once M > 1):
             2 (N - 1) alpha + 2 (N - 1) / N S / B
  mpi-hier   the MPI reducer's hierarchical all-reduce: the G - 1 other ranks
             of a node send S to local rank 0 one round after another, the
             node leaders' ring (M ranks) over the network, local rank 0 sends
             the G - 1 copies back in one round
  nccl-ring  NCCL's ring: pipelined, so the latency is that of the hops once
             around (2 ((N - M) alpha_intra + (M - 1) alpha_inter)) and the
             bandwidth the least of a GPU's NVLink and a node's NICs (NCCL
             spreads its rings over every NIC): 2 (N - 1) / N S / B
  nccl-tree  NCCL's tree: a chain within a node, a double binary tree over
             the nodes: 2 ((G - 1) alpha_intra + ceil(log2 M) alpha_inter) and
             the busier of a GPU's NVLink (2 S) and a node's NICs (S on 2
             nodes, 2 S on more: each node is inside one of the two trees)
  nccl       the faster of the two for each bucket, as NCCL's tuner picks
Buckets in flight: the NCCL reducer queues every all-reduce on one stream, so
bucket b starts when it is ready and bucket b - 1 has ended. The MPI reducer
posts every bucket as it is handed out and its rounds share the links, so a
bucket's latencies overlap the transfers of the buckets before it and only
its bytes wait for theirs: end_b = max(ready_b + latency_b, end_b-1) +
transfer_b. The slowest rank hands each bucket out last: every ready time is
moved by the expected largest of N draws from the recorded spread.
A step at N ranks is data + forward + backward + the spread's delay + the
all-reduce left after backward (exposed) + optimizer; at N = 1 no
all-reduce and no spread. Scaling efficiency is step(1) / step(N), audio-s/s
N x the audio of a rank's step / step(N).
Left out: congestion between jobs and in the network's core, the CPU the
MPI reducer's thread and the kernel's TCP take from compute, the 16-bit
casts, ranks whose compute gets slower as there are more of them (the
recorded threads per rank are kept), NCCL's protocol choice below its Simple
protocol, stragglers beyond the spread recorded.
"""

import argparse
import bisect
import json
import math
import statistics
import sys
from dataclasses import dataclass, field

MB = 1 << 20


@dataclass(frozen=True)
class Link:
    latency_s: float
    bytes_per_s: float


@dataclass(frozen=True)
class Cluster:
    ranks_per_node: int
    intra: Link  # within a node: shared memory (CPU) or NVLink (a GPU's)
    inter: Link  # between nodes: a node's network, all its NICs together


@dataclass(frozen=True)
class Cost:
    """One bucket's all-reduce: the latencies on its path and the time its
    bytes keep the links busy."""
    latency_s: float
    transfer_s: float

    @property
    def seconds(self):
        return self.latency_s + self.transfer_s


def nodes_of(n, cluster):
    g = min(cluster.ranks_per_node, n)
    return g, max(1, n // g)


def ring(nbytes, n, link):
    """A ring all-reduce of n ranks in 2 (n - 1) rounds of nbytes / n."""
    if n <= 1:
        return Cost(0.0, 0.0)
    return Cost(2 * (n - 1) * link.latency_s, 2 * (n - 1) / n * nbytes / link.bytes_per_s)


def mpi_flat(nbytes, n, cluster):
    _, m = nodes_of(n, cluster)
    return ring(nbytes, n, cluster.inter if m > 1 else cluster.intra)


def mpi_hierarchical(nbytes, n, cluster):
    g, m = nodes_of(n, cluster)
    intra = cluster.intra
    gather = Cost((g - 1) * intra.latency_s, (g - 1) * nbytes / intra.bytes_per_s)
    leaders = ring(nbytes, m, cluster.inter)
    send_back = Cost(intra.latency_s, (g - 1) * nbytes / intra.bytes_per_s) if g > 1 else Cost(0, 0)
    return Cost(gather.latency_s + leaders.latency_s + send_back.latency_s,
                gather.transfer_s + leaders.transfer_s + send_back.transfer_s)


def nccl_ring(nbytes, n, cluster):
    if n <= 1:
        return Cost(0.0, 0.0)
    _, m = nodes_of(n, cluster)
    bandwidth = cluster.intra.bytes_per_s
    if m > 1:
        bandwidth = min(bandwidth, cluster.inter.bytes_per_s)
    latency = 2 * ((n - m) * cluster.intra.latency_s + (m - 1) * cluster.inter.latency_s)
    return Cost(latency, 2 * (n - 1) / n * nbytes / bandwidth)


def nccl_tree(nbytes, n, cluster):
    if n <= 1:
        return Cost(0.0, 0.0)
    g, m = nodes_of(n, cluster)
    depth = math.ceil(math.log2(m)) if m > 1 else 0
    latency = 2 * ((g - 1) * cluster.intra.latency_s + depth * cluster.inter.latency_s)
    network_bytes = 0 if m == 1 else nbytes if m == 2 else 2 * nbytes
    transfer = max(2 * nbytes / cluster.intra.bytes_per_s if g > 1 else 0.0,
                   network_bytes / cluster.inter.bytes_per_s)
    return Cost(latency, transfer)


def nccl_choice(nbytes, n, cluster):
    """NCCL's tuner picks, per call, the algorithm its model finds fastest."""
    return min(nccl_ring(nbytes, n, cluster), nccl_tree(nbytes, n, cluster),
               key=lambda cost: cost.seconds)


ALGORITHMS = {"mpi-flat": mpi_flat, "mpi-hier": mpi_hierarchical, "nccl-ring": nccl_ring,
              "nccl-tree": nccl_tree, "nccl": nccl_choice}
SERIAL = {"nccl-ring", "nccl-tree", "nccl"}  # one stream: one bucket after another


def bus_bandwidth(algorithm, nbytes, n, cluster):
    """nccl-tests' busbw of an all-reduce: nbytes / time x 2 (n - 1) / n."""
    return nbytes / ALGORITHMS[algorithm](nbytes, n, cluster).seconds * 2 * (n - 1) / n


def bucket_sizes(total_bytes, bucket_bytes, first_bytes):
    """mpi/bucket_plan.h's cut, from the end of the buffer: bytes of each bucket."""
    sizes, left = [], total_bytes
    size = first_bytes
    while left > 0:
        sizes.append(min(size, left))
        left -= sizes[-1]
        size = bucket_bytes
    return sizes


def expected_max(deviations, n):
    """The expected largest of n draws (with replacement) from deviations."""
    if not deviations:
        return 0.0
    values = sorted(deviations)
    k = len(values)
    return sum(v * ((i / k) ** n - ((i - 1) / k) ** n) for i, v in enumerate(values, start=1))


@dataclass
class Profile:
    """One rank's step: seconds of data, forward + backward and optimizer;
    ready: (bytes ready counted from the buffer's end, seconds from the start
    of compute), increasing; the audio seconds of a rank's step; the spread."""
    data_s: float
    forward_backward_s: float
    optimizer_s: float
    total_bytes: int
    ready: list
    audio_s: float
    spread_s: list = field(default_factory=list)

    def ready_s(self, end_bytes):
        """When the first end_bytes bytes from the buffer's end were all ready."""
        points = [b for b, _ in self.ready]
        i = bisect.bisect_left(points, end_bytes)
        return self.ready[min(i, len(self.ready) - 1)][1]

    def alone_s(self):
        return self.data_s + self.forward_backward_s + self.optimizer_s

    def scaled(self, k):
        """The same step with every compute time k times as long."""
        return Profile(self.data_s * k, self.forward_backward_s * k, self.optimizer_s * k,
                       self.total_bytes, [(b, t * k) for b, t in self.ready], self.audio_s,
                       [d * k for d in self.spread_s])


@dataclass
class Step:
    seconds: float
    exposed_s: float


def simulate(profile, cluster, n, algorithm, bucket_bytes, first_bytes, wire_bytes=4):
    """One step at n ranks: its time and the all-reduce exposed after backward."""
    if n <= 1:
        return Step(profile.alone_s(), 0.0)
    straggle = expected_max(profile.spread_s, n)
    cost_of = ALGORITHMS[algorithm]
    end = 0.0
    handed_out = 0.0
    done = 0
    for size in bucket_sizes(profile.total_bytes, bucket_bytes, first_bytes):
        done += size
        handed_out = max(handed_out, profile.ready_s(done) + straggle)
        cost = cost_of(size * wire_bytes / 4, n, cluster)
        if algorithm in SERIAL:
            end = max(handed_out, end) + cost.seconds
        else:
            end = max(handed_out + cost.latency_s, end) + cost.transfer_s
    backward_end = profile.forward_backward_s + straggle
    exposed = max(0.0, end - backward_end)
    return Step(profile.data_s + backward_end + exposed + profile.optimizer_s, exposed)


# ---- inputs -----------------------------------------------------------------

def read_lines(path):
    out = []
    with open(path) as f:
        for number, line in enumerate(f, start=1):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as error:
                sys.exit(f"step-model: {path}:{number}: not JSON ({error})")
    return out


def timeline_steps(records, skip):
    steps = [r for r in records if r.get("kind") == "timeline" and r["step"] > skip]
    if not steps:
        sys.exit(f"step-model: no timeline line after step {skip} "
                 "(train with --output.timeline=true)")
    return steps


def profile_from_timeline(path, skip):
    """A Profile from a metrics file written with output.timeline."""
    records = read_lines(path)
    steps = timeline_steps(records, skip)
    ranks = [r for s in steps for r in s["ranks"]]
    sizes = ranks[0]["bucket_bytes"]
    if any(r["bucket_bytes"] != sizes for r in ranks):
        sys.exit(f"step-model: {path}: the ranks' buckets differ")
    ready, done = [], 0
    for b, size in enumerate(sizes):
        done += size
        ready.append((done, statistics.median(r["ready_ms"][b] - r["data_ms"] for r in ranks) / 1e3))
    spread = []
    for s in steps:
        mean = statistics.fmean(r["forward_backward_ms"] for r in s["ranks"])
        spread += [(r["forward_backward_ms"] - mean) / 1e3 for r in s["ranks"]]
    world = len(steps[0]["ranks"])
    train = [r for r in records if r.get("kind") == "train" and r["step"] > skip]
    audio = statistics.median(r["audio_s_per_s"] * r["step_ms"] / 1e3 / world for r in train) \
        if train else 0.0
    return Profile(
        data_s=statistics.median(min(r["data_ms"] for r in s["ranks"]) for s in steps) / 1e3,
        forward_backward_s=statistics.median(r["forward_backward_ms"] for r in ranks) / 1e3,
        optimizer_s=statistics.median(r["optimizer_ms"] for r in ranks) / 1e3,
        total_bytes=done, ready=ready or [(0, 0.0)], audio_s=audio, spread_s=spread)


def measured_from_timeline(path, skip):
    """The recorded run's own figures: the median over steps of the slowest
    rank's step and of the least wait of any rank (bench-scaling's exposed)."""
    steps = timeline_steps(read_lines(path), skip)
    return (statistics.median(max(r["step_ms"] for r in s["ranks"]) for s in steps) / 1e3,
            statistics.median(min(r["comm_wait_ms"] for r in s["ranks"]) for s in steps) / 1e3)


def profile_from_roofline(path):
    """A Profile from roofline_timeline_bench's JSON (times in ms)."""
    with open(path) as f:
        r = json.load(f)
    return Profile(data_s=0.0, forward_backward_s=r["forward_backward_ms"] / 1e3,
                   optimizer_s=r["optimizer_ms"] / 1e3, total_bytes=r["gradient_bytes"],
                   ready=[(b, ms / 1e3) for b, ms in r["ready"]], audio_s=r["audio_s"])


def gbit(rate):
    return rate * 1e9 / 8


# Link rates are line rates less what the link's own framing takes: TCP/IP
# over Ethernet carries 1448 of every 1538 bytes (0.94); NVLink 4 gives NCCL
# about 370 of its 450 GB/s a direction (NVIDIA/nccl-tests#212); NDR
# InfiniBand 46-48 of 50 GB/s (NVIDIA/nccl-tests#290: 0.94). Latencies:
# NCCL's Simple protocol per hop (src/graph/tuning.cc: a few us on NVLink, more
# on the network); MPI over TCP a round of the MPI reducer (network and the
# communication thread's poll).
TCP_ON_ETHERNET = 1448 / 1538
SYSTEMS = {
    "h200": Cluster(8, Link(5e-6, 370e9), Link(10e-6, 8 * gbit(400) * 0.94)),
    "a100": Cluster(8, Link(5e-6, 300e9 * 370 / 450), Link(10e-6, 8 * gbit(200) * 0.94)),
    "cpu-10g": Cluster(1, Link(5e-6, 5e9), Link(100e-6, gbit(10) * TCP_ON_ETHERNET)),
    "cpu-25g": Cluster(1, Link(5e-6, 5e9), Link(100e-6, gbit(25) * TCP_ON_ETHERNET)),
}


def cluster_from(args):
    base = SYSTEMS[args.system]
    intra, inter = base.intra, base.inter
    if args.inter_gbit is not None:
        inter = Link(inter.latency_s, gbit(args.inter_gbit) * TCP_ON_ETHERNET)
    if args.inter_measured_gbit is not None:
        inter = Link(inter.latency_s, gbit(args.inter_measured_gbit))
    if args.inter_latency_us is not None:
        inter = Link(args.inter_latency_us * 1e-6, inter.bytes_per_s)
    if args.intra_gbyte is not None:
        intra = Link(intra.latency_s, args.intra_gbyte * 1e9)
    return Cluster(args.ranks_per_node or base.ranks_per_node, intra, inter)


# ---- output -----------------------------------------------------------------

def sweep(profile, cluster, algorithms, wires, buckets_mb, first_mb, max_ranks):
    """{(algorithm, wire, bucket MB): [(n, Step), ...]} for n = 1, 2, 4, ..."""
    counts = [2 ** k for k in range(int(math.log2(max_ranks)) + 1)]
    out = {}
    for algorithm in algorithms:
        for wire in wires:
            for bucket in buckets_mb:
                out[(algorithm, wire, bucket)] = [
                    (n, simulate(profile, cluster, n, algorithm, int(bucket * MB),
                                 int(first_mb * MB), 2 if wire != "fp32" else 4)) for n in counts]
    return out


def print_sweep(results, profile, cluster):
    alone = profile.alone_s()
    print(f"one rank alone: step {alone * 1e3:.1f} ms (data {profile.data_s * 1e3:.1f}, forward + "
          f"backward {profile.forward_backward_s * 1e3:.1f}, optimizer "
          f"{profile.optimizer_s * 1e3:.1f}), {profile.total_bytes / MB:.1f} MiB of gradients, "
          f"{cluster.ranks_per_node} ranks a node")
    print("| all-reduce | wire | bucket MB | ranks | nodes | step ms | exposed ms | efficiency % "
          "| audio-s/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (algorithm, wire, bucket), rows in results.items():
        for n, step in rows:
            _, m = nodes_of(n, cluster)
            print(f"| {algorithm} | {wire} | {bucket:g} | {n} | {m} | {step.seconds * 1e3:.1f} | "
                  f"{step.exposed_s * 1e3:.1f} | {100 * alone / step.seconds:.1f} | "
                  f"{n * profile.audio_s / step.seconds:.0f} |")
    print("\nwhere efficiency first falls below 90%:")
    for (algorithm, wire, bucket), rows in results.items():
        below = [(n, nodes_of(n, cluster)[1]) for n, step in rows if alone / step.seconds < 0.9]
        where = f"{below[0][0]} ranks, {below[0][1]} nodes" if below else f"not up to {rows[-1][0]} ranks"
        print(f"  {algorithm} {wire} {bucket:g} MB: {where}")


def draw(results, profile, cluster, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(9, 6))
    alone = profile.alone_s()
    for (algorithm, wire, bucket), rows in results.items():
        axes.plot([n for n, _ in rows], [100 * alone / s.seconds for _, s in rows], marker="o",
                  label=f"{algorithm}, {wire}, {bucket:g} MB buckets")
    axes.set_xscale("log", base=2)
    axes.set_xlabel(f"ranks ({cluster.ranks_per_node} a node)")
    axes.set_ylabel("scaling efficiency, % (model)")
    axes.axhline(90, color="grey", linewidth=0.5)
    axes.legend(fontsize="small")
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", nargs="?", choices=["sweep", "validate"], default="sweep")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--timeline", help="metrics.jsonl of a run with output.timeline")
    source.add_argument("--gpu", help="a preset's roofline, from build/roofline_timeline_bench")
    parser.add_argument("--skip", type=int, default=0, help="leave out steps up to this one")
    parser.add_argument("--compute-scale", type=float, default=1.0,
                        help="every compute time this many times the recorded one (or the "
                             "roofline bound's): 0.25 for nodes 4 times as fast")
    parser.add_argument("--no-spread", action="store_true",
                        help="ranks as fast as each other (the recorded spread left out)")
    parser.add_argument("--system", choices=sorted(SYSTEMS), default="cpu-10g")
    parser.add_argument("--ranks-per-node", type=int)
    parser.add_argument("--inter-gbit", type=float,
                        help="a node's Ethernet, Gbit/s (TCP carries 0.94 of it)")
    parser.add_argument("--inter-measured-gbit", type=float,
                        help="what a node's link carries over TCP, measured, Gbit/s")
    parser.add_argument("--inter-latency-us", type=float)
    parser.add_argument("--intra-gbyte", type=float, help="within a node, GB/s")
    parser.add_argument("--algorithm", action="append", choices=sorted(ALGORITHMS))
    parser.add_argument("--wire", action="append", choices=["fp32", "bf16"])
    parser.add_argument("--bucket-mb", type=float, action="append")
    parser.add_argument("--first-bucket-mb", type=float, default=1.0)
    parser.add_argument("--max-ranks", type=int, default=1024)
    parser.add_argument("--nodes", type=int, help="validate: the run's nodes")
    parser.add_argument("--png", help="draw the efficiency curves here")
    args = parser.parse_args(argv)

    profile = (profile_from_timeline(args.timeline, args.skip) if args.timeline
               else profile_from_roofline(args.gpu)).scaled(args.compute_scale)
    if args.no_spread:
        profile.spread_s = []
    cluster = cluster_from(args)
    gpu = args.gpu is not None
    algorithms = args.algorithm or (["nccl-ring", "nccl-tree", "nccl"] if gpu else ["mpi-flat", "mpi-hier"])
    wires = args.wire or ["fp32", "bf16"]
    buckets = args.bucket_mb or ([25.0] if gpu else [1.0])
    if args.mode == "validate":
        if not args.timeline or not args.nodes:
            sys.exit("step-model: validate needs --timeline and --nodes")
        n = args.nodes * cluster.ranks_per_node
        step = simulate(profile, cluster, n, algorithms[0], int(buckets[0] * MB),
                        int(args.first_bucket_mb * MB), 2 if wires[0] != "fp32" else 4)
        measured_step, measured_exposed = measured_from_timeline(args.timeline, args.skip)
        print(json.dumps({"ranks": n, "predicted_step_ms": step.seconds * 1e3,
                          "measured_step_ms": measured_step * 1e3,
                          "predicted_exposed_ms": step.exposed_s * 1e3,
                          "measured_exposed_ms": measured_exposed * 1e3}))
        return
    results = sweep(profile, cluster, algorithms, wires, buckets, args.first_bucket_mb,
                    args.max_ranks)
    print_sweep(results, profile, cluster)
    if args.png:
        draw(results, profile, cluster, args.png)


if __name__ == "__main__":
    main(sys.argv[1:])
