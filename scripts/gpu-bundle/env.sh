# Sourced (bash) from the unpacked bundle of scripts/gpu-bundle.sh: the
# environment its programs run in, on a machine that has none of our packages.
#
# Sets and exports
#   MPIASR_BUNDLE             this folder (or as given)
#   MPIASR_LD_LIBRARY_PATH    the bundle's lib/ first, then the folders where the
#                             libraries of needs-from-device.txt were found, then
#                             the caller's LD_LIBRARY_PATH. Give it to the
#                             bundle's programs only (bundle_run), not to the
#                             machine's own tools, which may need newer libraries.
#   OPAL_*, PMIX_*            OpenMPI and PMIx relocated into this folder, so
#                             mpirun, orted (a singleton starts one), the MCA
#                             plugins, help files and settings are found here
#   HWLOC_PLUGINS_PATH        hwloc's plugins from lib/hwloc
#   OMPI_ALLOW_RUN_AS_ROOT*   when running as root
# and prints, for each library in needs-from-device.txt (the driver, the CUDA
# toolkit's libraries and NCCL, which the bundle does not carry), the file it
# will use and where it was found. Search order: the CUDA toolkit ($CUDA_HOME,
# /usr/local/cuda), the driver's and the system's library folders, then
# NVIDIA's Python wheels (site-packages/nvidia/*/lib of the python3 on PATH,
# then of the usual environments). MPIASR_MISSING_LIBS lists what was not found.
#
# MPIASR_SYSROOT, when set, is prefixed to every path searched, but not to the
# paths set: the environment is for programs started later under `chroot
# $MPIASR_SYSROOT` (tests/integration/gpu_bundle.sh); python3 is not asked then.

MPIASR_BUNDLE="${MPIASR_BUNDLE:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
export MPIASR_BUNDLE

# Folders to search, "kind<TAB>folder" a line, in order.
mpiasr_library_folders() {
  local sysroot="${MPIASR_SYSROOT:-}" dir site
  for dir in ${CUDA_HOME:+"$CUDA_HOME/lib64" "$CUDA_HOME/lib"} /usr/local/cuda/lib64 \
    /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    printf 'CUDA toolkit\t%s\n' "$dir"
  done
  for dir in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64 \
    /lib/x86_64-linux-gnu; do
    printf 'system\t%s\n' "$dir"
  done
  local sites=()
  if [[ -z "$sysroot" ]] && command -v python3 > /dev/null; then
    # nvidia is a namespace package: one folder per site-packages that has wheels of it.
    mapfile -t sites < <(timeout 30 python3 -c \
      'import nvidia, os; print("\n".join(os.path.dirname(p) for p in nvidia.__path__))' \
      2> /dev/null)
  fi
  sites+=("$sysroot"/opt/torch/.venv/lib/python3*/site-packages
    "$sysroot"/usr/local/lib/python3*/dist-packages "$sysroot"/usr/lib/python3/dist-packages)
  for site in "${sites[@]}"; do
    for dir in "$site"/nvidia/*/lib; do
      [[ -d "$dir" ]] && printf 'Python wheel\t%s\n' "${dir#"$sysroot"}"
    done
  done
}

mpiasr_find_device_libraries() {
  local sysroot="${MPIASR_SYSROOT:-}" folders soname kind dir found path_dirs=()
  mapfile -t folders < <(mpiasr_library_folders)
  MPIASR_MISSING_LIBS=""
  echo "libraries from this machine (needs-from-device.txt):"
  while read -r soname; do
    [[ -n "$soname" ]] || continue
    found=""
    for entry in "${folders[@]}"; do
      kind="${entry%%$'\t'*}" dir="${entry#*$'\t'}"
      if [[ -e "$sysroot$dir/$soname" ]]; then
        found="$dir/$soname"
        break
      fi
    done
    if [[ -z "$found" ]]; then
      printf '  %-20s NOT FOUND\n' "$soname"
      MPIASR_MISSING_LIBS+="$soname "
      continue
    fi
    printf '  %-20s %s -> %s (%s)\n' "$soname" "$found" \
      "$(basename "$(readlink -f "$sysroot$found")")" "$kind"
    [[ " ${path_dirs[*]} " == *" $dir "* ]] || path_dirs+=("$dir")
  done < "$sysroot$MPIASR_BUNDLE/needs-from-device.txt"
  local joined
  joined="$(IFS=:; echo "${path_dirs[*]}")"
  MPIASR_LD_LIBRARY_PATH="$MPIASR_BUNDLE/lib${joined:+:$joined}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export MPIASR_LD_LIBRARY_PATH MPIASR_MISSING_LIBS
}

mpiasr_find_device_libraries

export OPAL_PREFIX="$MPIASR_BUNDLE" OPAL_EXEC_PREFIX="$MPIASR_BUNDLE"
export OPAL_BINDIR="$MPIASR_BUNDLE/bin" OPAL_SBINDIR="$MPIASR_BUNDLE/bin"
export OPAL_LIBDIR="$MPIASR_BUNDLE/lib" OPAL_PKGLIBDIR="$MPIASR_BUNDLE/lib/openmpi"
export OPAL_DATAROOTDIR="$MPIASR_BUNDLE/share" OPAL_DATADIR="$MPIASR_BUNDLE/share"
export OPAL_PKGDATADIR="$MPIASR_BUNDLE/share/openmpi" OPAL_SYSCONFDIR="$MPIASR_BUNDLE/etc/openmpi"
export PMIX_PREFIX="$MPIASR_BUNDLE" PMIX_EXEC_PREFIX="$MPIASR_BUNDLE"
export PMIX_BINDIR="$MPIASR_BUNDLE/bin" PMIX_LIBDIR="$MPIASR_BUNDLE/lib"
export PMIX_PKGLIBDIR="$MPIASR_BUNDLE/lib/pmix" PMIX_DATAROOTDIR="$MPIASR_BUNDLE/share"
export PMIX_DATADIR="$MPIASR_BUNDLE/share" PMIX_PKGDATADIR="$MPIASR_BUNDLE/share/pmix"
export PMIX_SYSCONFDIR="$MPIASR_BUNDLE/etc/pmix"
export PMIX_MCA_mca_base_component_path="$MPIASR_BUNDLE/lib/pmix"
export HWLOC_PLUGINS_PATH="$MPIASR_BUNDLE/lib/hwloc"
if [[ $(id -u) == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# Runs a program of the bundle with the bundle's libraries.
bundle_run() {
  LD_LIBRARY_PATH="$MPIASR_LD_LIBRARY_PATH" "$@"
}
