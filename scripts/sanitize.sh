#!/usr/bin/env bash
# Builds the unit tests (GoogleTest, CPU only, no CUDA) with clang,
# AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/ and runs
# them with ctest; the integration scripts are left out. Any sanitizer report
# fails its test. Prints the build and run times.
#
#   scripts/sanitize.sh               every unit test (about 12 min to build
#                                     from scratch on 2 cores, 30 s to run)
#   scripts/sanitize.sh io base       the tests of those tests/<folder>s only
#                                     (what the test command runs: the layers
#                                     that read the user's files)
#
# SANITIZE_BUILD_DIR names another build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${SANITIZE_BUILD_DIR:-build-asan}"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
mkdir -p "$build_dir"
# No emulation build: the test command's own build runs it under ASan already.
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -DMPIASR_SANITIZE=ON -DMPIASR_CUDA=OFF \
  -DMPIASR_CUDA_EMU=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >"$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log"; exit 1; }
start=$(date +%s)
# Listing the tests (gtest_discover_tests, at build time) starts MPI in the
# tests/mpi executables; OpenMPI never frees its start-up memory. The tests
# that start MPI run without leak checks (CMakeLists.txt), the others with.
targets=(unit_tests)
labels=()
if (($# > 0)); then
  targets=()
  for folder in "$@"; do targets+=("unit_tests_$folder"); done
  labels=(-L "^($(IFS='|'; echo "$*"))\$")
fi
ASAN_OPTIONS=detect_leaks=0 cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"
built=$(date +%s)
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
status=0
(cd "$build_dir" && ctest --output-on-failure -j "$(nproc)" --timeout 1800 -E '^integration\.' \
  "${labels[@]}") || status=$?
echo "sanitize: build $((built - start)) s, tests $(($(date +%s) - built)) s"
exit "$status"
