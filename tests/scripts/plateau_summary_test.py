#!/usr/bin/env python3
"""scripts/plateau-summary.py on metrics files written here, whose plateau
steps, validation CERs and gradient ratios are known by construction: a run
that reaches the plateau at step 4 and leaves it at step 40; one whose blank
wins on 85% of the frames after the plateau (not left: the bound is 80%); one
that never reaches it; a ratio over steps 30-80 of a step-dependent norm,
against its sum worked out by hand; a run without diagnostics lines and a
line that is not JSON, each an error naming the file.

Usage: tests/scripts/plateau_summary_test.py PATH/TO/plateau-summary.py
"""
import importlib.util
import io
import json
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

spec = importlib.util.spec_from_file_location("plateau_summary", sys.argv.pop(1))
summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(summary)


def diagnostics(step, blank_argmax, lowest=0.5, head=10.0):
    return {"kind": "diagnostics", "step": step, "blank_argmax": blank_argmax,
            "grad_norms": {"encoder.layers.0": lowest, "ctc_head": head}}


def write_run(folder, records):
    os.makedirs(folder)
    with open(os.path.join(folder, "metrics.jsonl"), "w", encoding="utf-8") as f:
        for record in records:
            f.write((record if isinstance(record, str) else json.dumps(record)) + "\n")
    return folder


class PlateauSummary(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp()

    def run_of(self, name, records):
        return summary.summarize(write_run(os.path.join(self.folder, name), records))

    def test_reach_and_leave(self):
        argmax = {s: 0.3 for s in range(1, 4)}
        argmax.update({s: 1.0 for s in range(4, 40)})
        argmax.update({s: 0.5 for s in range(40, 101)})
        records = [diagnostics(s, a) for s, a in sorted(argmax.items())]
        records += [{"kind": "valid", "step": 100, "cer": 0.75},
                    {"kind": "valid", "step": 150, "cer": 0.5},
                    {"kind": "train", "step": 100, "loss": 2.0}]
        row = self.run_of("leaves", records)
        self.assertEqual(row["reach"], 4)
        self.assertEqual(row["leave"], 40)
        self.assertEqual(row["valid_cer"], {100: 75.0, 150: 50.0})
        self.assertAlmostEqual(row["ratio"], 0.05)

    def test_a_blank_that_wins_on_85_percent_has_not_left(self):
        records = [diagnostics(s, 1.0 if s < 30 else 0.85) for s in range(1, 101)]
        row = self.run_of("stays", records)
        self.assertEqual((row["reach"], row["leave"]), (1, None))

    def test_a_dip_before_ten_plateau_steps_is_not_leaving(self):
        # 9 steps on the plateau, a dip, then 10 more: the run leaves at the
        # first step under 80% after those 10.
        argmax = [1.0] * 9 + [0.5] + [1.0] * 10 + [0.7] * 5
        row = self.run_of("dip", [diagnostics(s + 1, a) for s, a in enumerate(argmax)])
        self.assertEqual((row["reach"], row["leave"]), (1, 21))
        self.assertIsNone(row["ratio"])  # steps 30-80 not all recorded

    def test_never_on_the_plateau(self):
        row = self.run_of("never", [diagnostics(s, 0.9) for s in range(1, 60)])
        self.assertEqual((row["reach"], row["leave"]), (None, None))

    def test_ratio_is_the_mean_over_steps_30_to_80(self):
        # lowest / head = step / 1000 at each step: mean over 30..80 is 55 / 1000.
        records = [diagnostics(s, 1.0, lowest=s / 100, head=10.0) for s in range(1, 151)]
        self.assertAlmostEqual(self.run_of("ratio", records)["ratio"], 0.055)

    def test_table_and_json(self):
        run = write_run(os.path.join(self.folder, "table"),
                        [diagnostics(s, 1.0 if s < 20 else 0.1) for s in range(1, 101)])
        out = os.path.join(self.folder, "summary.json")
        sys.argv = ["plateau-summary.py", "--json", out, run]
        text = io.StringIO()
        with redirect_stdout(text):
            summary.main()
        self.assertRegex(text.getvalue(), r"table\s+1\s+20\s+-\s+/\s+-\s+/\s+-\s+/\s+-\s+0\.0500\n")
        with open(out, encoding="utf-8") as f:
            self.assertEqual(json.load(f)[0]["leave"], 20)

    def test_errors_name_the_file(self):
        with self.assertRaisesRegex(SystemExit, r"nodiag/metrics.jsonl has no diagnostics"):
            self.run_of("nodiag", [{"kind": "train", "step": 1, "loss": 3.0}])
        with self.assertRaisesRegex(SystemExit, r"bad/metrics.jsonl:2: not JSON"):
            self.run_of("bad", [diagnostics(1, 1.0), "{not json"])


if __name__ == "__main__":
    unittest.main()
