"""Reads the F32 tensors of a safetensors file, and the losses a run logged,
for the training tests' comparisons (tests/integration/mpi_train_*.sh put
this folder on PYTHONPATH)."""
import json
import math
import struct


def tensors(path):
    """name -> list of floats, read from a safetensors file (F32 only)."""
    data = open(path, "rb").read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        begin, end = info["data_offsets"]
        out[name] = struct.unpack(f"<{(end - begin) // 4}f", data[8 + length + begin:8 + length + end])
    return out


def max_relative_difference(a, b):
    """(max over tensors of |a - b| / |b| in 2-norms, that tensor's name) of two
    tensors() results with the same names."""
    assert a.keys() == b.keys(), sorted(a.keys() ^ b.keys())
    worst = (0.0, "")
    for name in a:
        diff = math.sqrt(sum((x - y) ** 2 for x, y in zip(a[name], b[name])))
        norm = math.sqrt(sum(y * y for y in b[name]))
        worst = max(worst, (diff / max(norm, 1e-30), name))
    return worst


def train_losses(run_dir):
    """(step, loss) of every train record of run_dir/metrics.jsonl, in order."""
    records = [json.loads(line) for line in open(f"{run_dir}/metrics.jsonl")]
    return [(r["step"], r["loss"]) for r in records if r["kind"] == "train"]
