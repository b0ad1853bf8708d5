#!/usr/bin/env bash
# Installs dependencies, builds mpiasr (with the CUDA targets when nvcc is
# present) and runs every test with ctest; then the unit tests of the layers
# that read the user's files (tests/io, tests/base) again under
# AddressSanitizer and UndefinedBehaviorSanitizer (scripts/sanitize.sh, a
# clang build in build-asan/), and every fuzz target for 5 s
# (scripts/fuzz.sh, build-fuzz/). All the unit tests under the sanitizers,
# about 12 more minutes: bash scripts/sanitize.sh.
# Usage: scripts/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build}"
bash scripts/install-deps.sh
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" -j "$(nproc)"
(cd "$build_dir" && ctest --output-on-failure -j "$(nproc)" --timeout 900)
bash scripts/sanitize.sh io base
bash scripts/fuzz.sh all 5
