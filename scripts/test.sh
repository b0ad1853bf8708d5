#!/usr/bin/env bash
# Installs dependencies, builds mpiasr (with the CUDA targets when nvcc is
# present), runs every test with ctest, then every fuzz target for 20 s
# (scripts/fuzz.sh, its own clang build in build-fuzz/).
# Usage: scripts/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build}"
bash scripts/install-deps.sh
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" -j "$(nproc)"
(cd "$build_dir" && ctest --output-on-failure -j "$(nproc)" --timeout 900)
bash scripts/fuzz.sh all 20
