#!/usr/bin/env bash
# Builds the unit tests (GoogleTest, CPU only, no CUDA) with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/ and runs
# them with ctest; the integration scripts are left out. Any sanitizer report
# fails its test. Prints the build and run times (on 2 cores: about 11 min to
# build from scratch, 30 s to run).
# Usage: scripts/sanitize.sh [ctest -R regex]   (SANITIZE_BUILD_DIR: another folder)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${SANITIZE_BUILD_DIR:-build-asan}"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
mkdir -p "$build_dir"
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DMPIASR_SANITIZE=ON -DMPIASR_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >"$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log"; exit 1; }
start=$(date +%s)
# Listing the tests (gtest_discover_tests, at build time) starts MPI in the
# tests/mpi executables; OpenMPI never frees its start-up memory. The tests
# that start MPI run without leak checks (CMakeLists.txt), the others with.
ASAN_OPTIONS=detect_leaks=0 cmake --build "$build_dir" -j "$(nproc)" --target unit_tests
built=$(date +%s)
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
(cd "$build_dir" && ctest --output-on-failure -j "$(nproc)" --timeout 1800 -E '^integration\.' \
  ${1:+-R "$1"}) || status=$?
echo "sanitize: build $((built - start)) s, tests $(($(date +%s) - built)) s"
exit "$status"
