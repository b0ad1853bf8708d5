#!/usr/bin/env bash
# NCCL bootstrapped over MPI on real GPUs: nccl_test under mpirun with one rank
# per visible GPU (unique id from rank 0 over MPI_Bcast, world and node
# communicators, the bucketed gradient all-reduce), then one rank more than
# there are GPUs, which must stop every rank with a clear message naming the
# two local ranks that would share a GPU and its PCI bus id. Without a GPU it
# prints SKIP and passes: the parts that need none run in the nccl_test ctest
# entries.
# Usage: bash nccl_gpus.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir="$(cd "$1" && pwd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if [[ ! -x "$build_dir/nccl_test" ]]; then
  echo "SKIP: $build_dir/nccl_test not built (no CUDA toolkit at configure time)"
  exit 0
fi
gpus=0
if command -v nvidia-smi > /dev/null; then
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
fi
if [[ -n "${CUDA_VISIBLE_DEVICES:-}" ]]; then
  IFS=',' read -ra visible <<< "$CUDA_VISIBLE_DEVICES"
  gpus=$(( ${#visible[@]} < gpus ? ${#visible[@]} : gpus ))
fi
if (( gpus < 1 )); then
  echo "SKIP: no GPU (nvidia-smi lists none); NCCL under mpirun needs one rank per GPU"
  exit 0
fi

echo "nccl_gpus: $gpus GPU(s), $gpus rank(s)"
mpirun -np "$gpus" --oversubscribe "$build_dir/nccl_test" --gtest_brief=1

ranks=$((gpus + 1))
echo "nccl_gpus: $ranks ranks on $gpus GPU(s) must fail with a clear message"
if output=$(mpirun -np "$ranks" --oversubscribe "$build_dir/nccl_test" --gtest_brief=1 \
  --gtest_filter='NcclBootstrap.SelectsTheDeviceOfItsLocalRank' 2>&1); then
  echo "$output"
  echo "FAIL: $ranks ranks on $gpus GPU(s) did not fail"
  exit 1
fi
if ! grep -q "local ranks 0 and $gpus would share the GPU at PCI" <<< "$output"; then
  echo "$output"
  echo "FAIL: the error does not name the two ranks that would share a GPU"
  exit 1
fi
echo "nccl_gpus: all passed"
