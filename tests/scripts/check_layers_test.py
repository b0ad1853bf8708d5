#!/usr/bin/env python3
"""The layer check (scripts/check-layers.py) on small planted trees: each
include that breaks the graph makes it exit 1 naming the file, the line and
the include; each allowed one leaves it at exit 0.

Usage: tests/scripts/check_layers_test.py PATH/TO/check-layers.py
"""
import os
import subprocess
import sys
import tempfile

# (file, include, allowed)
CASES = [
    ("kernels/cpu/gemm.cpp", "io/audio.h", False),       # kernels imports none of io/model/mpi
    ("kernels/bench/x_bench.cpp", "model/conformer.h", False),
    ("kernels/cuda/x.cpp", "mpi/context.h", False),
    ("model/conformer.h", "io/batch.h", False),          # io, model, mpi do not import each other
    ("mpi/broadcast.cpp", "io/checkpoint.h", False),
    ("io/loader.cpp", "mpi/context.h", False),
    ("io/loader.cpp", "src/config.h", False),            # nothing below the program imports src
    ("model/cuda/x.cpp", "src/trainer.h", False),
    ("src/base/rng.h", "kernels/philox.h", False),       # base imports nothing of the project
    ("src/base/file.cpp", "src/config.h", False),
    ("tests/kernels/x_test.cpp", "model/conformer.h", False),  # tests/<layer>: that layer and below
    ("tests/model/x_test.cpp", "tests/io/helper.h", False),
    ("tests/base/x_test.cpp", "tests/io/helper.h", False),  # helpers: a lower layer's only
    ("tests/io/x_test.cpp", "src/config.h", False),
    ("kernels/cpu/gemm.cpp", "src/base/error.h", True),
    ("kernels/cuda/gemm.cpp", "kernels/gemm_check.h", True),
    ("io/loader.cpp", "kernels/philox.h", True),
    ("model/conformer.h", "kernels/backend.h", True),
    ("mpi/cuda/x.cpp", "kernels/cuda/cuda_check.h", True),
    ("src/base/file.cpp", "src/base/error.h", True),
    ("src/trainer.cpp", "io/loader.h", True),
    ("src/trainer.cpp", "src/base/rng.h", True),
    ("tests/model/x_test.cpp", "kernels/cpu/cpu_backend.h", True),
    ("tests/model/x_test.cpp", "tests/model/random_batch.h", True),
    ("tests/io/x_test.cpp", "tests/base/temp_dir.h", True),
    ("tests/cuda/x_test.cpp", "tests/model/random_batch.h", True),
    ("tests/app/x_test.cpp", "src/trainer.h", True),
    ("io/loader.cpp", "kiss_fftr.h", True),  # not a project path
]


def run(checker, files):
    """Runs the checker on a tree holding `files` (path -> text)."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as file:
                file.write(text)
        result = subprocess.run([sys.executable, checker, root], capture_output=True, text=True)
        return result.returncode, result.stdout


def main(checker):
    failures = []
    for path, include, ok in CASES:
        # The include on line 3, after a comment and a system include.
        text = f'// planted\n#include <vector>\n#include "{include}"\n'
        code, out = run(checker, {path: text})
        if ok and (code != 0 or out.count(":3:") != 0):
            failures.append(f"{path} -> {include}: allowed, but the check said ({code}) {out!r}")
        expected = f"{path}:3: "
        if not ok and (code != 1 or expected not in out or include not in out):
            failures.append(f"{path} -> {include}: forbidden, but the check said ({code}) {out!r}")
    # One bad include among good ones: exactly that one is named.
    code, out = run(checker, {
        "kernels/cpu/a.cpp": '#include "kernels/cpu/a.h"\n#include "src/base/error.h"\n',
        "model/b.cpp": '#include "model/b.h"\n\n#include "kernels/backend.h"\n#include "io/batch.h"\n',
        "src/c.cpp": '#include "model/b.h"\n#include "io/batch.h"\n',
    })
    if code != 1 or out.splitlines() != ["model/b.cpp:4: model may not include io/batch.h (io)"]:
        failures.append(f"mixed tree: ({code}) {out!r}")
    for failure in failures:
        print(failure)
    print(f"{len(CASES) + 1 - len(failures)} of {len(CASES) + 1} cases as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
