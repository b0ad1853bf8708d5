#!/usr/bin/env bash
# The step's timeline (output.timeline, DESIGN.md "The step's timeline"): 2
# ranks train `tiny` for 6 steps with buckets of 64 KiB after a first one of
# 16 KiB, and every step's "timeline" line in metrics.jsonl must hold what
# the reducer does:
#   - both ranks, with the same bucket sizes, which are the plan's cut of the
#     parameter buffer counted from the checkpoint: each tensor of
#     model.safetensors padded to 64 elements (model/parameters.h), 4 bytes
#     each, cut from the end into 16 KiB, then 64 KiB buckets, the rest last
#   - per bucket ready <= start <= end, ready after the step's data
#   - buckets ready in backward's order and started in index order
#   - the last bucket ends before the wait in the all-reduce does, and that
#     before the step ends
# and a run without the option writes no timeline line.
# Usage: bash mpi_train_timeline.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
# shellcheck source=tests/integration/lib/train_runs.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/train_runs.sh"
train_setup "$1" "$2" mpi_train_timeline

options=("${tiny_options[@]}" --training.max_steps=6 --training.log_every=4
  --distributed.bucket_mb=0.0625 --distributed.first_bucket_mb=0.015625)
run_ok "$work/timeline.log" mpirun -np 2 --oversubscribe "$mpiasr" train "$tiny" \
  "${options[@]}" --output.timeline=true --output.dir="$work/timeline"
run_ok "$work/plain.log" mpirun -np 2 --oversubscribe "$mpiasr" train "$tiny" \
  "${options[@]}" --training.max_steps=2 --output.dir="$work/plain"
! grep -q '"kind":"timeline"' "$work/plain/metrics.jsonl" ||
  fail "output.timeline is off, yet metrics.jsonl has timeline lines"

PYTHONPATH="$(dirname "${BASH_SOURCE[0]}")/lib" /usr/bin/python3 - "$work" <<'EOF' || fail "the timeline does not hold (see above)"
import json, sys

from safetensors_f32 import tensors

work = sys.argv[1]
padded = sum((len(t) + 63) // 64 * 64 for t in tensors(f"{work}/timeline/checkpoints/step-00000006/model.safetensors").values())
first, rest = 4096, 16384  # elements: first_bucket_mb and bucket_mb
expected = [first]
left = padded - first
while left > 0:
    expected.append(min(rest, left))
    left -= rest
expected = [4 * n for n in expected]
lines = [json.loads(l) for l in open(f"{work}/timeline/metrics.jsonl")]
steps = [l for l in lines if l["kind"] == "timeline"]
assert [l["step"] for l in steps] == list(range(1, 7)), [l["step"] for l in steps]
for line in steps:
    where = f"step {line['step']}"
    assert [r["rank"] for r in line["ranks"]] == [0, 1], where
    for r in line["ranks"]:
        at = f"{where} rank {r['rank']}"
        assert r["bucket_bytes"] == expected, (at, r["bucket_bytes"], expected, padded)
        assert all(type(n) is int for n in r["bucket_bytes"]), (at, r["bucket_bytes"])
        ready, start, end = r["ready_ms"], r["start_ms"], r["end_ms"]
        assert len(ready) == len(start) == len(end) == len(expected), at
        for b in range(len(expected)):
            assert r["data_ms"] <= ready[b] <= start[b] <= end[b], (at, b, r)
        assert ready == sorted(ready) and start == sorted(start), (at, r)
        wait_end = r["data_ms"] + r["forward_backward_ms"] + r["comm_wait_ms"]
        assert max(end) <= wait_end + 1e-6 and wait_end <= r["step_ms"] + 1e-6, (at, r)
print(f"  6 steps on 2 ranks: {len(expected)} buckets of {sum(expected)} bytes ({padded} padded parameters)")
EOF
rm -rf "$work"
echo "mpi_train_timeline: all checks passed"
