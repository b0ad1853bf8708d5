#!/usr/bin/env python3
"""The GPU check's sum of Nsight Compute's kernel times by kernel
(scripts/gpu-bundle/ncu-kernels.sh) against sums worked out by hand from
ncu_raw_page.txt beside this file: the output of `ncu --csv --page raw
--print-units base --metrics gpu__time_duration.sum,dram__bytes.sum` over 7
launches of 4 kernels, with ncu's ==PROF== lines and the program's own line
before the CSV. The same launches in ncu's scaled units (usecond, Mbyte) sum
the same; an input without the CSV, or without a metric's column, fails.

Usage: tests/scripts/ncu_kernels_test.py PATH/TO/ncu-kernels.sh
"""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = sys.argv.pop(1)
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ncu_raw_page.txt")

# launches; ms; share of 2.050 ms; GB/s = bytes / ns
EXPECTED = [
    # 600,000 + 640,000 + 200,000 + 250,000 + 150,000 + 160,000 + 50,000 ns = 2.050 ms;
    # 1,946,000,000 bytes / 2,050,000 ns = 949.3 GB/s
    ["all", "7", "2.050", "100.0", "949"],
    # 600,000 + 640,000 ns; 640,000,000 bytes / 1,240,000 ns = 516.1 GB/s
    ["attention_forward_kernel<__half, 64>", "2", "1.240", "60.5", "516"],
    # 200,000 + 250,000 + 150,000 ns; 1,200,000,000 bytes / 600,000 ns
    ["nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NNT", "3", "0.600", "29.3", "2000"],
    # 96,000,000 bytes / 160,000 ns
    ["layernorm_param_partials_kernel<__half>", "1", "0.160", "7.8", "600"],
    # 10,000,000 bytes / 50,000 ns
    ["cutlass::Kernel2<cutlass_80_wmma_tensorop_f16_s161616gemm_f16_32x32_128x2_tn_align8>",
     "1", "0.050", "2.4", "200"],
]


def run(text):
    with tempfile.NamedTemporaryFile("w", suffix=".log") as log:
        log.write(text)
        log.flush()
        return subprocess.run(["bash", SCRIPT, log.name], capture_output=True, text=True)


def table(result):
    return [line.split("\t") for line in result.stdout.splitlines()]


class NcuKernels(unittest.TestCase):
    def setUp(self):
        with open(FIXTURE) as f:
            self.log = f.read()

    def test_sums_by_kernel_longest_first(self):
        result = run(self.log)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(table(result), EXPECTED)

    def test_scaled_units_sum_the_same(self):
        lines = self.log.splitlines()
        units = lines.index('"","","","","","","","","","","","byte","nsecond"')
        lines[units] = lines[units].replace('"byte","nsecond"', '"Mbyte","usecond"')
        for i in range(units + 1, len(lines)):
            head, dram, time = lines[i].rsplit('","', 2)
            dram = int(dram.replace(",", "")) / 1e6
            time = int(time.strip('"').replace(",", "")) / 1e3
            lines[i] = f'{head}","{dram:,.2f}","{time:,.2f}"'
        result = run("\n".join(lines) + "\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(table(result), EXPECTED)

    def test_without_the_csv_fails(self):
        result = run("\n".join(line for line in self.log.splitlines() if line.startswith("==")))
        self.assertEqual(result.returncode, 1)
        self.assertIn("no Nsight Compute CSV", result.stderr)

    def test_without_a_metric_column_fails(self):
        result = run(self.log.replace('"dram__bytes.sum"', '"dram__bytes_read.sum"'))
        self.assertEqual(result.returncode, 1)
        self.assertIn("dram__bytes.sum", result.stderr)


if __name__ == "__main__":
    unittest.main()
