#!/usr/bin/env bash
# Installs every Debian package that mpiasr's build, tests and demo need.
# Idempotent: packages already present are skipped by apt, so running it twice
# is safe and the second run takes a few seconds.
set -euo pipefail

packages=(
  # build
  build-essential cmake pkg-config clang-format git
  # io
  libsndfile1-dev libsoxr-dev libkissfft-dev libfftw3-dev
  libyaml-cpp-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  libsentencepiece-dev sentencepiece
  # compute
  libopenblas-dev
  # the SIMT emulator's fibers (kernels/cuda_emu)
  libboost-context-dev
  # distributed
  libopenmpi-dev openmpi-bin libpmix-dev slurm-wlm slurm-wlm-basic-plugins munge
  # tests and benchmarks; sctk (sclite) checks the scorer, python3-torch the
  # model (scripts/pytorch)
  libgtest-dev libgmock-dev libbenchmark-dev sctk python3-torch python3-yaml python3-soundfile
  # fuzzing and sanitizers (scripts/fuzz.sh): clang, libFuzzer, ASan, UBSan
  clang libclang-rt-14-dev
  # corpus generation (speech synthesis, mixing) and plotting
  espeak-ng flite sox libsox-fmt-all wamerican fortunes wordnet-base dict-gcide
  python3-matplotlib python3-numpy
  # utilities the scripts call (iproute2: ip and tc for scripts/fake-cluster-net.sh)
  util-linux procps xz-utils time iproute2
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${#missing[@]} packages: ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
