#!/usr/bin/env python3
"""Checks that every #include "..." of the C++ and CUDA sources follows the
layer graph of DESIGN.md ("Layers"); prints each include that does not, as
file:line, and exits 1 when there is one.

    base     src/base/                    includes nothing of the project
    kernels  kernels/ (cpu, cuda, bench)  base
    io       io/                          kernels, base
    model    model/                       kernels, base
    mpi      mpi/                         kernels, base
    app      src/ (the program)           io, model, mpi, kernels, base

A folder's own files are always allowed. io, model and mpi do not include
each other; nothing but the program includes src/. Tests: tests/<layer>/ may
include what its layer may, its layer, its own test helpers and those of the
layers below it (tests/base/temp_dir.h for any test); tests/app and
tests/cuda (which join the layers) may include everything.

An include whose first folder is not a project folder is not the project's
and is not checked.

Usage: scripts/check-layers.py [REPOSITORY_ROOT]   (default: this script's ..)
"""
import os
import re
import sys

ALLOWED = {
    "base": {"base"},
    "kernels": {"kernels", "base"},
    "io": {"io", "kernels", "base"},
    "model": {"model", "kernels", "base"},
    "mpi": {"mpi", "kernels", "base"},
    "app": {"app", "io", "model", "mpi", "kernels", "base"},
}
SOURCE_FOLDERS = ("src", "kernels", "io", "model", "mpi", "tests")
SOURCE_SUFFIXES = (".h", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """The layer of a repository path ("tests/model" for a model test), or None."""
    parts = path.split("/")
    if parts[0] == "src":
        return "base" if len(parts) > 2 and parts[1] == "base" else "app"
    if parts[0] in ("kernels", "io", "model", "mpi"):
        return parts[0]
    if parts[0] == "tests" and len(parts) > 2:
        return "tests/" + parts[1]
    return None


def allowed(source_layer, target_layer):
    if source_layer.startswith("tests/"):
        folder = source_layer[len("tests/"):]
        if folder not in ALLOWED:  # tests/app, tests/cuda: every layer
            return True
        if target_layer.startswith("tests/"):  # test helpers: its own or a lower layer's
            return target_layer[len("tests/"):] in ALLOWED[folder]
        return target_layer in ALLOWED[folder]
    return target_layer in ALLOWED[source_layer]


def check(root):
    """Returns (problems, includes checked, files read)."""
    problems, includes, files = [], 0, 0
    for folder in SOURCE_FOLDERS:
        for directory, subdirectories, names in os.walk(os.path.join(root, folder)):
            subdirectories.sort()
            for name in sorted(names):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/")
                source_layer = layer_of(path)
                if source_layer is None:
                    continue
                files += 1
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as file:
                    for number, line in enumerate(file, 1):
                        match = INCLUDE.match(line)
                        if not match:
                            continue
                        target = match.group(1)
                        target_layer = layer_of(target)
                        if target_layer is None:
                            continue
                        includes += 1
                        if not allowed(source_layer, target_layer):
                            problems.append(
                                f"{path}:{number}: {source_layer} may not include {target} "
                                f"({target_layer})")
    return problems, includes, files


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems, includes, files = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-layers: {len(problems)} of {includes} includes break the layer graph "
              "(DESIGN.md, \"Layers\")", file=sys.stderr)
        return 1
    print(f"check-layers: {includes} includes in {files} files follow the layer graph")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
