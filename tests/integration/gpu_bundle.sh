#!/usr/bin/env bash
# The GPU bundle (scripts/gpu-bundle.sh) on a machine that has none of our
# packages, as the GPU machine will be: packed from BUILD_DIR, it runs in a
# root that holds only glibc, the CUDA toolkit's libraries and NCCL (bound
# read-only from this machine), entered with chroot in a private mount
# namespace, with /proc, /sys, /dev and a fresh /tmp.
#
#  1. Every ELF file of the bundle (programs, libraries, OpenMPI's, PMIx's
#     and hwloc's plugins) loads there: the dynamic loader of the root finds
#     each library it needs (ld.so --list); a failure names file and library.
#  2. Every program starts: the GoogleTest programs list their tests, mpiasr
#     prints its help, the benchmarks list theirs, mpirun prints its version.
#  3. The CPU parts pass and the GPU parts skip with their message: the GPU
#     tests, nccl_test as a singleton and under the bundle's `mpirun -np 1`
#     (no plugin fails to load), and mpiasr trains `tiny` on the CPU.
#  4. A missing library fails the check and is named: checks 1 and 2 with
#     libsndfile.so.1 taken out of the bundle must fail naming it.
#  5. run.sh itself, with a shell and the usual tools added to the root
#     (bash, sh, coreutils, grep, sed, awk, tar, gzip, xz): it ends within its
#     time, exits 0, and writes its table with the GPU steps skipped (and
#     PyTorch's and Nsight Compute's, neither being there).
# Needs root (chroot, mount namespace); prints SKIP otherwise, or when
# BUILD_DIR has no CUDA targets. Usage: bash gpu_bundle.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
work="$build_dir/gpu_bundle"
root="$work/root"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# ---- inside the mount namespace (the second half of this script) --------------------------

# Runs a command in the root with the bundle's environment (env.sh's variables).
in_root() {
  env -i "${root_env[@]}" "$chroot" "$root" "$@"
}

# Checks that every ELF file under the root's folder $1 finds its libraries
# there; prints "file: library" for each one that does not.
missing_libraries() {
  local bundle=$1 elf output rc
  while IFS= read -r elf; do
    rc=0
    output=$(in_root /lib64/ld-linux-x86-64.so.2 --list "${elf#"$root"}" 2>&1) || rc=$?
    if grep -q 'not found' <<< "$output"; then
      awk -v f="${elf#"$root$bundle/"}" '/not found/ { print f ": " $1 }' <<< "$output"
    elif [[ "$output" =~ error\ while\ loading\ shared\ libraries:\ ([^:]+): ]]; then
      echo "${elf#"$root$bundle/"}: ${BASH_REMATCH[1]}"
    elif ((rc != 0)); then
      echo "${elf#"$root$bundle/"}: ld.so --list exited $rc: $output"
    fi
  done < <(find "$root$bundle/bin" "$root$bundle/lib" -type f \( -perm -u+x -o -name '*.so*' \))
}

# Runs a program of the bundle in folder $1 that must exit 0 and print $2;
# on failure prints why, naming a library the loader did not find.
starts() {
  local bundle=$1 expect=$2 output rc=0
  shift 2
  output=$(in_root "$bundle/bin/$1" "${@:2}" 2>&1) || rc=$?
  if [[ "$output" =~ error\ while\ loading\ shared\ libraries:\ ([^:]+): ]]; then
    echo "$1 does not start: ${BASH_REMATCH[1]} not found"
    return 1
  fi
  ((rc == 0)) || { echo "$1 ${*:2}: exit $rc: $(tail -n 3 <<< "$output")"; return 1; }
  grep -q -- "$expect" <<< "$output" || { echo "$1 ${*:2}: no '$expect' in: $output"; return 1; }
}

# Every program of a bundle folder starts (2); prints what failed.
programs_start() {
  local bundle=$1 failed=0 test
  for test in cuda_kernels_test cuda_training_test nccl_test offset_allocator_test; do
    starts "$bundle" '^  [A-Z]' "$test" --gtest_list_tests || failed=1
  done
  starts "$bundle" 'train' mpiasr --help || failed=1
  starts "$bundle" 'linear_forward_ffn1' cuda_ops_bench --benchmark_list_tests || failed=1
  starts "$bundle" 'train_step/medium' cuda_train_bench --benchmark_list_tests || failed=1
  starts "$bundle" 'Open MPI' mpirun --version || failed=1
  return "$failed"
}

# A GoogleTest program's output: no test failed, and the tests that need a
# GPU (all of them with `gpu`, none without) skipped for want of a device.
expect_gtest() {  # output what [gpu]
  grep -q '^\[  PASSED  \] [0-9]* test' <<< "$1" || fail "$2: no PASSED line: $(tail -n 20 <<< "$1")"
  if grep -q '^\[  FAILED  \]' <<< "$1"; then fail "$2: tests failed: $(tail -n 20 <<< "$1")"; fi
  if [[ "${3:-}" == gpu ]]; then
    grep -q '^\[  SKIPPED \] [0-9]* test' <<< "$1" || fail "$2: no test skipped without a GPU"
    grep -q '^no CUDA device: ' <<< "$1" || fail "$2: no 'no CUDA device' reason"
  elif grep -q '^\[  SKIPPED \]' <<< "$1"; then
    fail "$2: tests skipped: $(tail -n 20 <<< "$1")"
  fi
  if grep -E 'unable to open|cannot open shared object' <<< "$1"; then
    fail "$2: a plugin or library failed to load"
  fi
}

inside() {
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs tmpfs "$root/tmp"
  chroot="$(command -v chroot)"
  local dir
  for dir in $(cat "$work/device-lib-dirs"); do
    mount --bind "$dir" "$root$dir"
    mount -o remount,bind,ro "$root$dir"
  done
  mapfile -t root_env < <(env -i PATH=/usr/bin:/bin MPIASR_SYSROOT="$root" MPIASR_BUNDLE=/bundle bash -c \
    'source "$MPIASR_SYSROOT/bundle/env.sh" > /dev/null && env' |
    grep -E '^(OPAL_|PMIX_|HWLOC_|OMPI_|MPIASR_(BUNDLE|LD_LIBRARY_PATH)=)')
  root_env+=(PATH=/bundle/bin:/usr/bin:/bin HOME=/tmp TMPDIR=/tmp)
  local ld_path
  ld_path=$(printf '%s\n' "${root_env[@]}" | sed -n 's/^MPIASR_LD_LIBRARY_PATH=//p')
  root_env+=("LD_LIBRARY_PATH=$ld_path" OMPI_MCA_mca_base_component_show_load_errors=1)
  local started=$SECONDS

  # 1. and 2.
  local missing
  missing=$(missing_libraries /bundle)
  [[ -z "$missing" ]] || fail "libraries not found in a root with glibc, CUDA and NCCL only:
$missing"
  programs_start /bundle || fail "a program of the bundle does not start (above)"
  echo "gpu_bundle: every ELF file loads and every program starts in the root"

  # 3.
  local output
  output=$(in_root /bundle/bin/offset_allocator_test 2>&1) || fail "offset_allocator_test: $output"
  expect_gtest "$output" offset_allocator_test
  output=$(in_root /bundle/bin/cuda_kernels_test 2>&1) || fail "cuda_kernels_test: $output"
  expect_gtest "$output" cuda_kernels_test gpu
  output=$(in_root /bundle/bin/cuda_training_test 2>&1) || fail "cuda_training_test: $output"
  expect_gtest "$output" cuda_training_test gpu
  output=$(in_root /bundle/bin/nccl_test 2>&1) || fail "nccl_test (singleton): $output"
  expect_gtest "$output" "nccl_test (singleton)" gpu
  output=$(in_root /bundle/bin/mpirun -np 1 /bundle/bin/nccl_test --gtest_color=no 2>&1) ||
    fail "mpirun -np 1 nccl_test: $output"
  expect_gtest "$output" "mpirun -np 1 nccl_test" gpu
  output=$(in_root /bundle/bin/mpiasr train /bundle/configs/tiny.yaml \
    --data.train_manifest=/bundle/corpus/train.tsv --data.valid_manifest=/bundle/corpus/valid.tsv \
    --tokenizer.model_path=/bundle/prepared/tokens.txt --features.cmvn_path=/bundle/prepared/cmvn.json \
    --training.device=cpu --training.threads=1 --training.max_steps=3 --validation.every_steps=0 \
    --checkpoint.every_steps=0 --output.dir=/tmp/cpu-train 2>&1) || fail "mpiasr train (CPU): $output"
  grep -q '^training done: 3 steps' <<< "$output" || fail "mpiasr train (CPU) did not finish: $output"
  echo "gpu_bundle: in the root the CPU tests pass, the GPU tests skip, mpirun -np 1 and a" \
    "singleton start, mpiasr trains on the CPU"

  # 4.
  mv "$root/bundle/lib/libsndfile.so.1" "$work/"
  missing=$(missing_libraries /bundle)
  grep -q 'bin/mpiasr: libsndfile.so.1' <<< "$missing" ||
    fail "the loader check did not name the removed libsndfile.so.1: $missing"
  output=$(programs_start /bundle) && fail "the programs started without libsndfile.so.1"
  grep -q 'mpiasr does not start: libsndfile.so.1 not found' <<< "$output" ||
    fail "the start check did not name the removed libsndfile.so.1: $output"
  mv "$work/libsndfile.so.1" "$root/bundle/lib/"
  echo "gpu_bundle: without libsndfile.so.1 both checks fail and name it"
  echo "gpu_bundle: checks 1-4 took $((SECONDS - started)) s"

  # 5.
  started=$SECONDS
  local rc=0
  timeout 300 env -i PATH=/usr/bin:/bin HOME=/tmp TMPDIR=/tmp "$chroot" "$root" \
    /bin/bash /gpu-bundle/run.sh /out > "$work/run.log" 2>&1 || rc=$?
  ((rc != 124)) || fail "run.sh did not end within 300 s without a GPU: $(tail -n 20 "$work/run.log")"
  ((rc == 0)) || fail "run.sh exited $rc: $(tail -n 40 "$work/run.log")"
  echo "gpu_bundle: run.sh in the root took $((SECONDS - started)) s"
}

if [[ "${GPU_BUNDLE_INSIDE:-}" == 1 ]]; then
  inside
  exit 0
fi

# ---- outside: pack, build the root, enter it ----------------------------------------------

if [[ ! -x "$build_dir/nccl_test" ]]; then
  echo "SKIP: $build_dir has no CUDA targets (no CUDA toolkit at configure time)"
  exit 0
fi
if [[ $(id -u) != 0 ]] || ! command -v unshare > /dev/null; then
  echo "SKIP: the root is entered with chroot in a mount namespace, which needs root"
  exit 0
fi
rm -rf "$work"
mkdir -p "$work"
started=$SECONDS
bash "$source_dir/scripts/gpu-bundle.sh" --build-dir "$build_dir" --no-build --out "$work/gpu-bundle" ||
  fail "gpu-bundle.sh failed"
echo "gpu_bundle: packing took $((SECONDS - started)) s; $(du -sh "$work/gpu-bundle" | cut -f1)"
started=$SECONDS

# glibc, from its package (not its gconv modules), with the links of a
# merged /usr (/lib -> usr/lib) as this machine has them.
mkdir -p "$root"/{proc,sys,dev,tmp,out,etc,bundle,usr}
for top in /bin /sbin /lib /lib64; do
  if [[ -L "$top" ]]; then
    cp -P "$top" "$root$top"
    mkdir -p "$root/$(readlink -f "$top")"
  fi
done
# Copies a file (a link as a link) to the same place under the root.
copy_into_root() {
  local dir
  dir="$root$(readlink -f "$(dirname "$1")")"
  mkdir -p "$dir"
  [[ -e "$dir/$(basename "$1")" || -L "$dir/$(basename "$1")" ]] || cp -P "$1" "$dir/"
}
dpkg -L libc6 | grep -E '^/(usr/)?lib(64)?/' | grep -v /gconv | while read -r file; do
  if [[ ! -d "$file" ]]; then copy_into_root "$file"; fi
done
echo "root:x:0:0:root:/tmp:/bin/bash" > "$root/etc/passwd"
echo "root:x:0:" > "$root/etc/group"
echo "127.0.0.1 localhost" > "$root/etc/hosts"

# Recreates a path's symbolic links under the root and prints the folder it ends at.
mirror_path() {
  local current="" part parts
  IFS=/ read -ra parts <<< "${1#/}"
  for part in "${parts[@]}"; do
    current="$current/$part"
    if [[ -L "$current" ]]; then
      mkdir -p "$root$(dirname "$current")"
      [[ -L "$root$current" ]] || cp -P "$current" "$root$current"
      current="$(readlink -f "$current")"
    fi
  done
  mkdir -p "$root$current"
  echo "$current"
}
# The folders this machine loads the CUDA libraries and NCCL from (bound there
# read-only once inside), with the links that lead to them, and the toolkit's
# usual /usr/local/cuda/lib64.
xz -dc "$work/gpu-bundle/payload.tar.xz" | tar -x -C "$root/bundle"
{
  ldd "$root/bundle/bin/mpiasr" | awk '$3 ~ /^\// { print $1 " " $3 }' |
    while read -r soname path; do
      if grep -qx "$soname" "$root/bundle/needs-from-device.txt"; then mirror_path "$(dirname "$path")"; fi
    done
  if [[ -d /usr/local/cuda/lib64 ]]; then mirror_path /usr/local/cuda/lib64; fi
} | sort -u > "$work/device-lib-dirs"
[[ -s "$work/device-lib-dirs" ]] || fail "found no folder of the CUDA libraries on this machine"
cp -r "$work/gpu-bundle" "$root/gpu-bundle"

# The tools run.sh needs, for check 5 (checks 1-4 run without them).
tools=(bash sh grep sed awk tar gzip xz)
mapfile -t coreutils < <(dpkg -L coreutils | grep -E '^/(usr/)?bin/')
for tool in "${tools[@]}" "${coreutils[@]}"; do
  path="$(command -v "$tool")"
  copy_into_root "$path"
  if [[ -L "$path" ]]; then  # awk -> /etc/alternatives/awk -> mawk: the program under its name
    rm "$root$(readlink -f "$(dirname "$path")")/$(basename "$path")"
    cp "$(readlink -f "$path")" "$root$(readlink -f "$(dirname "$path")")/$(basename "$path")"
  fi
  ldd "$path" | awk '$3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | while read -r lib; do
    copy_into_root "$(readlink -f "$lib")"
    [[ -L "$lib" ]] && copy_into_root "$lib"
  done
done
echo "gpu_bundle: the root took $((SECONDS - started)) s to build"

GPU_BUNDLE_INSIDE=1 unshare --mount --propagation private bash "$0" "$build_dir" "$source_dir"

# run.sh's files, read outside the root.
files=$(ls "$root/out")
[[ $(wc -l <<< "$files") -le 8 ]] || fail "run.sh left more than 8 files: $files"
for file in summary.txt summary.tsv logs.tar.gz; do
  [[ -s "$root/out/$file" ]] || fail "run.sh wrote no $file"
done
# The listing is read whole first: `tar | grep -q` fails under pipefail when
# grep stops reading before tar is done writing.
listing=$(tar -tzf "$root/out/logs.tar.gz")
grep -q 'logs/kernels.log' <<< "$listing" || fail "logs.tar.gz holds no kernels.log"
summary="$(cat "$root/out/summary.txt")"
row() {  # step status [text in details]
  grep -qE "^$1 +$2 .*${3:-}" <<< "$summary" || fail "run.sh's table has no '$1 $2 ${3:-}' row:
$summary"
}
row libraries PASS 'libcublasLt.so.13 .*CUDA toolkit'
row probe SKIP 'no nvidia-smi'
row allocator PASS '[0-9]+ passed'
row kernels SKIP '[0-9]+ passed, [0-9]+ skipped: no CUDA device'
row train_step SKIP 'no CUDA device'
row train SKIP 'no CUDA device'
row resume SKIP 'needs train'
row eval SKIP 'needs train'
row nccl_mpirun SKIP '[1-9][0-9]* passed, [0-9]+ skipped: no CUDA device'
row nccl_single SKIP '[1-9][0-9]* passed, [0-9]+ skipped: no CUDA device'
row bench_ops SKIP 'no CUDA device'
row bench_medium SKIP 'no CUDA device'
row bench_large SKIP 'no CUDA device'
row pytorch SKIP 'no python3 on PATH'
row profile SKIP 'no ncu'
row memcheck SKIP 'compute-sanitizer'
echo "$summary"
echo "gpu_bundle: all passed"
