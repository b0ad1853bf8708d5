#!/usr/bin/env python3
"""The step model (scripts/step-model.py) against closed forms worked out by
hand, not against its own output: the ring all-reduce 2 (N - 1) / N S / B +
2 (N - 1) alpha; the tree; the hierarchical all-reduce of 2 nodes of 2; a
single bucket after backward fully exposed; buckets ready long before
backward ends fully hidden; NCCL's buckets one after another; no
communication at N = 1; the expected largest of N draws; the bucket plan's
cut; a recorded timeline and a roofline timeline read back.

Usage: tests/scripts/step_model_test.py PATH/TO/step-model.py
"""
import importlib.util
import json
import os
import sys
import tempfile
import unittest

spec = importlib.util.spec_from_file_location("step_model", sys.argv.pop(1))
model = importlib.util.module_from_spec(spec)
sys.modules["step_model"] = model
spec.loader.exec_module(model)

ALPHA, B = 20e-6, 1e9  # 20 us a hop, 1 GB/s
S = 8e6                # an 8 MB bucket
FLAT = model.Cluster(1, model.Link(1e-6, 10e9), model.Link(ALPHA, B))


def profile(ready_s, forward_backward_s=1.0, total=S):
    """One bucket's worth of gradients, all ready at ready_s."""
    return model.Profile(data_s=0.1, forward_backward_s=forward_backward_s, optimizer_s=0.05,
                         total_bytes=int(total), ready=[(int(total), ready_s)], audio_s=10.0)


class Collectives(unittest.TestCase):
    def test_ring_is_the_closed_form(self):
        for n in (2, 3, 8, 64):
            expected = 2 * (n - 1) / n * S / B + 2 * (n - 1) * ALPHA
            self.assertAlmostEqual(model.mpi_flat(S, n, FLAT).seconds, expected, places=12)
            self.assertAlmostEqual(model.nccl_ring(S, n, FLAT).seconds, expected, places=12)

    def test_flat_ring_within_one_node_uses_its_memory(self):
        node = model.Cluster(4, model.Link(1e-6, 10e9), model.Link(ALPHA, B))
        self.assertAlmostEqual(model.mpi_flat(S, 4, node).seconds,
                               6 / 4 * S / 10e9 + 6 * 1e-6, places=12)

    def test_tree_is_the_closed_form(self):
        # M >= 3 nodes of 1: 2 ceil(log2 M) hops, each node sends 2 S.
        self.assertAlmostEqual(model.nccl_tree(S, 8, FLAT).seconds, 2 * 3 * ALPHA + 2 * S / B,
                               places=12)
        self.assertAlmostEqual(model.nccl_tree(S, 5, FLAT).seconds, 2 * 3 * ALPHA + 2 * S / B,
                               places=12)
        # 2 nodes: one hop each way, each node sends S.
        self.assertAlmostEqual(model.nccl_tree(S, 2, FLAT).seconds, 2 * ALPHA + S / B, places=12)

    def test_hierarchical_two_nodes_of_two(self):
        intra = model.Link(1e-6, 10e9)
        cluster = model.Cluster(2, intra, model.Link(ALPHA, B))
        gather = 1e-6 + S / 10e9
        leaders = 2 * ALPHA + S / B  # a ring of 2: 2 rounds of S / 2
        send_back = 1e-6 + S / 10e9
        self.assertAlmostEqual(model.mpi_hierarchical(S, 4, cluster).seconds,
                               gather + leaders + send_back, places=12)

    def test_bus_bandwidth_tends_to_the_link(self):
        self.assertAlmostEqual(model.bus_bandwidth("nccl-ring", 1e13, 16, FLAT) / B, 1.0, places=4)


class Steps(unittest.TestCase):
    def test_one_rank_has_no_communication(self):
        p = profile(0.5)
        step = model.simulate(p, FLAT, 1, "mpi-flat", int(S), int(S))
        self.assertEqual(step.exposed_s, 0.0)
        self.assertAlmostEqual(step.seconds, 0.1 + 1.0 + 0.05)

    def test_single_bucket_after_backward_is_fully_exposed(self):
        p = profile(1.0)  # ready as backward ends
        for algorithm in ("mpi-flat", "nccl-ring"):
            step = model.simulate(p, FLAT, 8, algorithm, int(S), int(S))
            ring = 2 * 7 / 8 * S / B + 2 * 7 * ALPHA
            self.assertAlmostEqual(step.exposed_s, ring, places=12)
            self.assertAlmostEqual(step.seconds, 0.1 + 1.0 + ring + 0.05, places=12)

    def test_a_bucket_ready_long_before_backward_ends_is_hidden(self):
        p = profile(0.0, forward_backward_s=10.0)
        step = model.simulate(p, FLAT, 64, "mpi-flat", int(S), int(S))
        self.assertEqual(step.exposed_s, 0.0)
        self.assertAlmostEqual(step.seconds, 0.1 + 10.0 + 0.05)

    def test_16_bit_wire_halves_the_bytes(self):
        p = profile(1.0)
        step = model.simulate(p, FLAT, 2, "mpi-flat", int(S), int(S), wire_bytes=2)
        self.assertAlmostEqual(step.exposed_s, (S / 2) / B + 2 * ALPHA, places=12)

    def test_nccl_runs_buckets_one_after_another_mpi_overlaps_latency(self):
        # Two 4 MB buckets both ready at the end of backward, 2 ranks.
        p = profile(1.0)
        half = 4e6
        one = 2 * ALPHA + half / B  # a ring of 2 over one bucket
        nccl = model.simulate(p, FLAT, 2, "nccl-ring", int(half), int(half))
        self.assertAlmostEqual(nccl.exposed_s, 2 * one, places=12)
        mpi = model.simulate(p, FLAT, 2, "mpi-flat", int(half), int(half))
        self.assertAlmostEqual(mpi.exposed_s, 2 * ALPHA + 2 * half / B, places=12)

    def test_spread_delays_the_slowest_rank(self):
        p = profile(0.0)
        p.spread_s = [-0.1, 0.1]
        # 2 draws from {-0.1, 0.1}: the largest is -0.1 with probability 1/4.
        self.assertAlmostEqual(model.expected_max(p.spread_s, 2), 0.1 * 3 / 4 - 0.1 / 4)
        step = model.simulate(p, FLAT, 2, "mpi-flat", int(S), int(S))
        self.assertAlmostEqual(step.seconds, 0.1 + 1.0 + 0.05 + 0.05, places=12)

    def test_faster_compute_exposes_more(self):
        # Ready at 0.95 of a 1 s backward, the 8 MB all-reduce over 2 ranks
        # (8 ms) hides; at a tenth of the compute 3 ms of it are left.
        p = profile(0.95)
        self.assertEqual(model.simulate(p, FLAT, 2, "mpi-flat", int(S), int(S)).exposed_s, 0.0)
        fast = model.simulate(p.scaled(0.1), FLAT, 2, "mpi-flat", int(S), int(S))
        self.assertAlmostEqual(fast.exposed_s, 0.095 + 2 * ALPHA + S / B - 0.1, places=12)
        self.assertAlmostEqual(p.scaled(0.1).alone_s(), 0.1 * (0.1 + 1.0 + 0.05), places=12)

    def test_bucket_plan_cuts_from_the_end(self):
        self.assertEqual(model.bucket_sizes(10, 4, 3), [3, 4, 3])
        self.assertEqual(model.bucket_sizes(3, 4, 3), [3])
        self.assertEqual(model.bucket_sizes(12, 5, 2), [2, 5, 5])


class Timeline(unittest.TestCase):
    def test_reads_a_recorded_run(self):
        def rank(r, fb, ready):
            return {"rank": r, "step_ms": 100.0, "data_ms": 10.0, "forward_backward_ms": fb,
                    "comm_wait_ms": 5.0 + r, "optimizer_ms": 4.0, "bucket_bytes": [100, 300],
                    "ready_ms": ready, "start_ms": ready, "end_ms": [x + 1 for x in ready]}
        lines = [{"kind": "timeline", "step": s,
                  "ranks": [rank(0, 70.0, [30.0, 80.0]), rank(1, 74.0, [34.0, 84.0])]}
                 for s in (1, 2, 3)]
        lines.append({"kind": "train", "step": 3, "audio_s_per_s": 40.0, "step_ms": 100.0})
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "metrics.jsonl")
            with open(path, "w") as f:
                f.writelines(json.dumps(line) + "\n" for line in lines)
            p = model.profile_from_timeline(path, 1)
            self.assertEqual(p.total_bytes, 400)
            self.assertEqual([b for b, _ in p.ready], [100, 400])
            self.assertAlmostEqual(p.ready_s(100), 0.022)  # median of 20 and 24 ms
            self.assertAlmostEqual(p.ready_s(101), 0.072)
            self.assertAlmostEqual(p.forward_backward_s, 0.072)
            self.assertAlmostEqual(p.data_s, 0.010)
            self.assertAlmostEqual(p.audio_s, 2.0)  # 40 audio-s/s x 0.1 s / 2 ranks
            self.assertEqual(sorted(p.spread_s), [-0.002, -0.002, 0.002, 0.002])
            step, exposed = model.measured_from_timeline(path, 1)
            self.assertAlmostEqual(step, 0.1)
            self.assertAlmostEqual(exposed, 0.005)


class Roofline(unittest.TestCase):
    def test_reads_the_roofline_timeline(self):
        roofline = {"preset": "x", "parameters": 100, "gradient_bytes": 512, "audio_s": 480.0,
                    "forward_backward_ms": 3.0, "optimizer_ms": 0.5,
                    "ready": [[256, 1.5], [500, 2.0], [512, 3.0]]}
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "roofline.json")
            with open(path, "w") as f:
                json.dump(roofline, f)
            p = model.profile_from_roofline(path)
        self.assertEqual((p.total_bytes, p.audio_s, p.spread_s), (512, 480.0, []))
        self.assertAlmostEqual(p.alone_s(), 0.0035)
        self.assertAlmostEqual(p.ready_s(256), 0.0015)
        self.assertAlmostEqual(p.ready_s(257), 0.002)
        self.assertAlmostEqual(p.ready_s(512), 0.003)


if __name__ == "__main__":
    unittest.main()
