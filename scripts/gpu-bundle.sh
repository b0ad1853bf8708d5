#!/usr/bin/env bash
# Packs mpiasr's GPU check into one folder that runs on a machine with an
# NVIDIA GPU, its driver, the CUDA toolkit's libraries (or NVIDIA's Python
# wheels) and NCCL, and nothing else of ours: no compiler, no Debian packages,
# no network. On that machine: bash gpu-bundle/run.sh OUTDIR (see
# scripts/gpu-bundle/run.sh for the steps and the table).
#
#   OUT/run.sh            the check (scripts/gpu-bundle/run.sh)
#   OUT/sanitize.sh       compute-sanitizer by hand (scripts/gpu-bundle/sanitize.sh)
#   OUT/payload.tar.xz    unpacked by run.sh into $TMPDIR:
#     bin/          mpiasr, the GPU tests and the CUDA benchmarks (stripped),
#                   OpenMPI's orterun (also as mpirun, mpiexec) and orted
#     lib/          every shared library these load, found with ldd (OpenMPI's
#                   and PMIx's plugins and hwloc's PCI plugin included), except
#                   glibc, the NVIDIA driver, the CUDA toolkit's libraries and
#                   NCCL, whose sonames needs-from-device.txt lists
#     lib/openmpi, lib/pmix, lib/hwloc   the plugins
#     share/, etc/  OpenMPI's and PMIx's help files and OpenMPI's settings
#     env.sh        relocates OpenMPI and PMIx there, finds the device's libraries
#     ncu-kernels.sh  sums Nsight Compute's kernel times by kernel (scripts/gpu-bundle/)
#     pytorch/      scripts/pytorch/bench_gpu_step.py and the model it trains,
#                   conformer_ctc.py: PyTorch's step beside mpiasr's
#     configs/      scripts/configs/{tiny,medium,large}.yaml
#     corpus/       60 generated utterances (scripts/make-corpus.sh, seed 3) and
#     prepared/     the tokenizer and CMVN statistics `mpiasr prepare` made of them
#   OUT/bundle-info.txt   the build it came from and what it holds
#
# The build: Release, with CUDA code for sm_90 (H100, H200). --build-dir DIR
# uses DIR (configured for sm_90 when it is new); without it, build/ is used
# when it already holds sm_90 code (the test command builds 80;90), otherwise
# build-gpu-bundle/ is configured for sm_90 alone. --no-build packs what DIR
# holds without building (the ctest entry, after the test command's build).
# The folder must stay under 60 MiB (it travels with the working tree, 64 MiB
# in all); the script fails when it does not.
#
# --emulated packs, under the same names, the programs built on the SIMT
# emulator (mpiasr_emu, cuda_kernels_test_emu, ...; MPIASR_CUDA_EMU) for the
# GPU check's rehearsal (tests/integration/gpu_rehearsal.sh); it needs no
# nvcc.
#
# Usage: scripts/gpu-bundle.sh [--build-dir DIR] [--out DIR] [--no-build] [--emulated]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

die() {
  echo "gpu-bundle.sh: error: $*" >&2
  exit 1
}

build_dir="" out="$root/gpu-bundle" build=1 emulated=0
while (($#)); do
  case "$1" in
    --build-dir) build_dir="${2:?--build-dir needs a folder}"; shift 2 ;;
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --no-build) build=0; shift ;;
    --emulated) emulated=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
start=$(date +%s)
note() { echo "gpu-bundle.sh [$(($(date +%s) - start)) s]: $*"; }

tests=(cuda_kernels_test cuda_training_test nccl_test offset_allocator_test)
benches=(cuda_ops_bench cuda_train_bench)
programs=(mpiasr "${tests[@]}" "${benches[@]}")
# The build's file of each program packed: itself, or with --emulated its
# emulated build.
declare -A built_as=()
suffix=""
((emulated)) && suffix=_emu
for program in "${programs[@]}"; do
  built_as[$program]=$program$suffix
done

if ((emulated)); then
  nvcc="" cuda_root="$(readlink -f /usr/local/cuda 2> /dev/null || true)"
else
  nvcc="${CUDACXX:-/usr/local/cuda/bin/nvcc}"
  [[ -x "$nvcc" ]] || nvcc="$(command -v nvcc || true)"
  [[ -x "$nvcc" ]] || die "no nvcc (looked at \$CUDACXX, /usr/local/cuda/bin/nvcc and PATH)"
  cuda_root="$(readlink -f "$(dirname "$nvcc")/..")"
fi

# The CUDA architectures a program holds machine code for: each cubin in its
# fatbin records the ptxas options it was made with ("-arch sm_90 -m 64");
# PTX alone records none.
cubin_archs() {
  { grep -ao -- '-arch sm_[0-9]*[a-z]* ' "$1" || true; } | sed 's/-arch //' | sort -u | tr -d ' ' |
    tr '\n' ' '
}
has_sm90() {
  [[ " $(cubin_archs "$1") " == *" sm_90 "* ]]
}

if [[ -z "$build_dir" ]]; then
  if ((emulated)) || [[ -f "$root/build/CMakeCache.txt" && -x "$root/build/mpiasr" ]] &&
    has_sm90 "$root/build/mpiasr"; then
    build_dir="$root/build"
  else
    build_dir="$root/build-gpu-bundle"
  fi
fi
mkdir -p "$build_dir"
build_dir="$(cd "$build_dir" && pwd)"
if ((build)); then
  if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
    launcher=()
    if command -v ccache > /dev/null; then
      launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    fi
    note "configure $build_dir (Release, CUDA architecture 90)"
    cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
      "${launcher[@]}" > "$build_dir/gpu-bundle-configure.log" ||
      { cat "$build_dir/gpu-bundle-configure.log"; die "configure failed"; }
  fi
  note "build ${built_as[*]} in $build_dir"
  cmake --build "$build_dir" -j "$(nproc)" --target "${built_as[@]}" > "$build_dir/gpu-bundle-build.log" 2>&1 ||
    { tail -40 "$build_dir/gpu-bundle-build.log"; die "build failed (log: $build_dir/gpu-bundle-build.log)"; }
fi
grep -q '^CMAKE_BUILD_TYPE:STRING=Release$' "$build_dir/CMakeCache.txt" ||
  die "$build_dir is not a Release build"
# Every program with CUDA code (the allocator test has none) holds sm_90's.
for program in "${programs[@]}"; do
  file="$build_dir/${built_as[$program]}"
  [[ -x "$file" ]] || die "$file is not built (a CUDA build is needed)"
  ((emulated)) && continue
  archs="$(cubin_archs "$file")"
  if [[ -n "$archs" || "$program" == mpiasr ]] && ! has_sm90 "$file"; then
    die "$file holds no sm_90 code (it has: ${archs:-none})"
  fi
done

stage="$out.tmp"
rm -rf "$stage"
payload="$stage/payload"
mkdir -p "$payload"/{bin,lib/openmpi,lib/pmix,lib/hwloc,share,etc,configs,corpus,prepared,pytorch}

# ---- programs and the OpenMPI runtime ------------------------------------------------------
note "programs"
for program in "${programs[@]}"; do
  strip --strip-unneeded -o "$payload/bin/$program" "$build_dir/${built_as[$program]}"
done
ompi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
ompi_bindir="$(ompi_path bindir)"
ompi_pkglibdir="$(ompi_path pkglibdir)"
ompi_pkgdatadir="$(ompi_path pkgdatadir)"
ompi_sysconfdir="$(ompi_path sysconfdir)"
cp "$(readlink -f "$ompi_bindir/orterun")" "$payload/bin/orterun"
cp "$(readlink -f "$ompi_bindir/orted")" "$payload/bin/orted"
ln -s orterun "$payload/bin/mpirun"
ln -s orterun "$payload/bin/mpiexec"
cp "$ompi_pkglibdir"/*.so "$payload/lib/openmpi/"
cp -r "$ompi_pkgdatadir" "$payload/share/openmpi"
cp -r "$ompi_sysconfdir" "$payload/etc/openmpi"
cat >> "$payload/etc/openmpi/openmpi-mca-params.conf" << 'EOF'

# The bundle (scripts/gpu-bundle.sh) runs on one machine that may have no ssh
# or rsh: mpirun, and the daemon an MPI singleton starts, launch locally only.
plm = isolated
EOF
pmix_libdir="$(pkg-config --variable=libdir pmix)"
pmix_prefix="$(pkg-config --variable=prefix pmix)"
cp "$pmix_libdir"/pmix/*.so "$payload/lib/pmix/"
cp -r "$pmix_prefix/share/pmix" "$payload/share/pmix"
mkdir -p "$payload/etc/pmix"
# hwloc's PCI plugin only: the others need OpenCL, X11 or libxml2 with ICU.
hwloc_plugin="$(find /usr/lib /usr/lib64 -path '*/hwloc/hwloc_pci.so' -print -quit 2> /dev/null || true)"
[[ -n "$hwloc_plugin" ]] && cp "$hwloc_plugin" "$payload/lib/hwloc/"

# ---- shared libraries ----------------------------------------------------------------------
# glibc's own libraries (from its package) stay behind, as do the driver's,
# the CUDA toolkit's (anything under $cuda_root) and NCCL: the device has its own.
note "shared libraries"
mapfile -t glibc < <(dpkg -L libc6 | grep -E '/(lib[^/]*\.so[^/]*|ld-linux[^/]*)$' | grep -v /gconv/ |
  xargs -n1 basename | sort -u)
is_glibc() {
  local name
  for name in "${glibc[@]}"; do [[ "$1" == "$name" ]] && return 0; done
  return 1
}
declare -A needs_from_device=([libcuda.so.1]=1)  # the CUDA runtime dlopens the driver
declare -A bundled=()
mapfile -d '' elfs < <(find "$payload/bin" "$payload/lib/openmpi" "$payload/lib/pmix" \
  "$payload/lib/hwloc" -type f -print0)
for elf in "${elfs[@]}"; do
  while IFS=$'\t' read -r soname path; do
    [[ -n "$soname" ]] || continue
    if [[ "$path" == "not found" ]]; then
      die "${elf#"$payload/"} needs $soname, which ldd does not find on this machine"
    fi
    real="$(readlink -f "$path")"
    if is_glibc "$soname"; then
      continue
    elif [[ "$soname" == libcuda.so* || "$soname" == libnvidia-* || "$real" == "$cuda_root"/* ||
      "$soname" == libnccl.so* ]]; then
      needs_from_device[$soname]=1
    elif [[ -z "${bundled[$soname]:-}" ]]; then
      cp "$real" "$payload/lib/$soname"
      bundled[$soname]="$real"
    fi
  done < <(ldd "$elf" | awk '$2 == "=>" { print $1 "\t" ($3 == "not" ? "not found" : $3) }')
done
printf '%s\n' "${!needs_from_device[@]}" | sort > "$payload/needs-from-device.txt"
cp "$root/scripts/gpu-bundle/env.sh" "$root/scripts/gpu-bundle/ncu-kernels.sh" "$payload/"
cp "$root/scripts/pytorch/bench_gpu_step.py" "$root/scripts/pytorch/conformer_ctc.py" "$payload/pytorch/"

# ---- configs, corpus, tokenizer and statistics ---------------------------------------------
note "corpus (cached in $build_dir/e2e_corpus) and mpiasr prepare"
cp "$root"/scripts/configs/{tiny,medium,large}.yaml "$payload/configs/"
corpus="$build_dir/e2e_corpus"
bash "$root/scripts/make-corpus.sh" --out "$corpus" --utterances 60 --seed 3 \
  --valid-fraction 0.1 --test-fraction 0.1 > "$build_dir/gpu-bundle-corpus.log" 2>&1 ||
  { tail -20 "$build_dir/gpu-bundle-corpus.log"; die "make-corpus.sh failed"; }
for split in train valid test; do
  cp "$corpus/$split.tsv" "$payload/corpus/"
  cut -f1 "$corpus/$split.tsv" | while read -r audio; do
    mkdir -p "$payload/corpus/$(dirname "$audio")"
    cp "$corpus/$audio" "$payload/corpus/$audio"
  done
done
"$build_dir/${built_as[mpiasr]}" prepare "$root/scripts/configs/tiny.yaml" \
  --data.train_manifest="$payload/corpus/train.tsv" --data.valid_manifest="$payload/corpus/valid.tsv" \
  --data.test_manifest="$payload/corpus/test.tsv" --output.dir="$stage/prepare" \
  > "$build_dir/gpu-bundle-prepare.log" 2>&1 ||
  { cat "$build_dir/gpu-bundle-prepare.log"; die "mpiasr prepare failed"; }
cp "$stage/prepare/tokens.txt" "$stage/prepare/cmvn.json" "$payload/prepared/"

# ---- pack ----------------------------------------------------------------------------------
note "pack (xz)"
unpacked_kib=$(du -sk "$payload" | cut -f1)
tar -C "$payload" -cf - . | xz -T"$(nproc)" -3 > "$stage/payload.tar.xz"
cp "$root/scripts/gpu-bundle/run.sh" "$root/scripts/gpu-bundle/sanitize.sh" "$stage/"
{
  echo "mpiasr GPU bundle, packed $(date -u '+%Y-%m-%d %H:%M UTC') by scripts/gpu-bundle.sh"
  echo "source: $(git -C "$root" describe --always --dirty 2> /dev/null || echo unknown)"
  if ((emulated)); then
    echo "build: $build_dir (Release; the SIMT emulator's programs, CUDA computed on the CPU)"
  else
    echo "build: $build_dir (Release; CUDA $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
  fi
  for program in "${programs[@]}"; do
    if ((emulated)); then
      printf '  %-22s %s\n' "$program" "${built_as[$program]}"
    else
      archs="$(cubin_archs "$build_dir/$program")"
      printf '  %-22s %s\n' "$program" "${archs:+machine code for }${archs:-no CUDA kernels}"
    fi
  done
  echo "bundled libraries (${#bundled[@]}):"
  for soname in $(printf '%s\n' "${!bundled[@]}" | sort); do
    printf '  %-32s %s\n' "$soname" "${bundled[$soname]}"
  done
  echo "from the device (needs-from-device.txt): $(tr '\n' ' ' < "$payload/needs-from-device.txt")"
  echo "payload: $((unpacked_kib / 1024)) MiB unpacked, $(($(stat -c %s "$stage/payload.tar.xz") / 1024 / 1024)) MiB packed"
} > "$stage/bundle-info.txt"
rm -rf "$payload" "$stage/prepare"
total_kib=$(du -sk "$stage" | cut -f1)
((total_kib <= 60 * 1024)) || die "the bundle is $((total_kib / 1024)) MiB, over 60 MiB"
rm -rf "$out"
mv "$stage" "$out"
note "$out: $((total_kib / 1024)) MiB ($(ls "$out" | tr '\n' ' '))"
