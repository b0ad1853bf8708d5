#!/usr/bin/env bash
# Installs dependencies, builds mpiasr (with the CUDA targets when nvcc is
# present) and runs every test with ctest; then the unit tests of the layers
# that read the user's files (tests/io, tests/base) again under
# AddressSanitizer and UndefinedBehaviorSanitizer (scripts/sanitize.sh, a
# clang build in build-asan/), and every fuzz target for 5 s
# (scripts/fuzz.sh, build-fuzz/). All the unit tests under the sanitizers,
# about 12 more minutes: bash scripts/sanitize.sh.
# A failing stage does not stop the ones after it, so one run reports
# everything: the script names each failed stage at the end and exits 1 if
# any failed (a failed install or build stops it at once).
# Usage: scripts/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build}"
bash scripts/install-deps.sh
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build_dir" -j "$(nproc)"
failed=()
(cd "$build_dir" && ctest --output-on-failure -j "$(nproc)" --timeout 900) || failed+=(ctest)
bash scripts/sanitize.sh io base || failed+=("sanitize (io, base)")
bash scripts/fuzz.sh all 5 || failed+=(fuzz)
if ((${#failed[@]} > 0)); then
  printf 'test.sh: FAILED: %s\n' "${failed[@]}"
  exit 1
fi
echo "test.sh: every stage passed"
