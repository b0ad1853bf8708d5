// Training entry point: checks that the ranks agree, picks the backend and
// runs the loop of trainer_impl.h on it: the CPU backend in fp32, or (built
// with CUDA) the CUDA backend in bf16-mixed or fp16-mixed on the GPU
// select_cuda_device picks, with NCCL bootstrapped over MPI for the gradient
// all-reduce.
#include "src/trainer.h"

#include <iostream>
#include <optional>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "mpi/agreement.h"
#include "mpi/broadcast.h"
#include "src/output_lock.h"
#include "src/trainer_impl.h"

#ifdef MPIASR_WITH_CUDA
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "mpi/collectives.h"
#include "mpi/cuda/nccl_communicator.h"
#include "mpi/cuda/nccl_gradient_reducer.h"
#endif

namespace mpiasr {

template class Trainer<float, float>;

#ifdef MPIASR_WITH_CUDA
template class Trainer<__half, float>;
template class Trainer<__nv_bfloat16, float>;

namespace {

// device = auto trains on CUDA only when every rank sees a GPU, so all ranks
// pick the same backend.
bool every_rank_has_cuda(const mpi::Context& ctx) {
  const int64_t has_device = cuda_device_count().count > 0 ? 1 : 0;
  return mpi::allreduce_min(ctx, has_device, "CUDA device check") == 1;
}

// The precision a CUDA run trains in: the mode asked for, auto resolved to
// bf16-mixed when every rank's GPU runs bf16 natively (compute capability 8.0
// and later) and to fp16-mixed otherwise. Every rank decides the same.
Precision cuda_precision(Precision asked, const mpi::Context& ctx, const CudaDeviceInfo& info) {
  if (asked == Precision::kFp32) {
    MPIASR_FAIL(ExitCode::kUsage,
                "precision.mode = fp32 on CUDA: the CUDA backend computes in 16 bits with fp32 "
                "master weights; set precision.mode to bf16-mixed, fp16-mixed or auto, or "
                "training.device to cpu");
  }
  const int64_t bf16_here = info.major >= 8 ? 1 : 0;
  const bool bf16_everywhere = mpi::allreduce_min(ctx, bf16_here, "bf16 support check") == 1;
  if (asked == Precision::kBf16Mixed && !bf16_everywhere) {
    MPIASR_FAIL(ExitCode::kUsage,
                "precision.mode = bf16-mixed needs GPUs of compute capability 8.0 or later on "
                "every rank; "
                    << ctx.rank_name(ctx.world_rank()) << " has " << info.name << " (sm_"
                    << info.major << info.minor << ")"
                    << (bf16_here ? " and another rank an older one" : "")
                    << "; set precision.mode to fp16-mixed or auto");
  }
  if (asked != Precision::kAuto) return asked;
  return bf16_everywhere ? Precision::kBf16Mixed : Precision::kFp16Mixed;
}

// `config` resolved to device cuda and its precision (what checkpoints record);
// Act is the precision's activation type.
template <typename Act>
TrainResult train_with(const Config& config, mpi::Context& ctx, const TrainOptions& options,
                       int threads, int device, std::ostream& out) {
  CudaBackend<Act> backend(CudaBackendOptions{
      .device = device, .reserve_bytes = size_t(config.training.gpu_reserve_mb * (1 << 20))});
  out << "backend: " << backend.name() << " per rank, " << to_string(config.precision.mode) << "\n";

  std::optional<mpi::NcclCommunicator> nccl;
  GradientSyncFactory make_gradient_sync;
  if (ctx.world_size() > 1) {
    nccl.emplace(mpi::NcclCommunicator::create(ctx, ctx.world_comm(), "world"));
    mpi::NcclReducerOptions reducer;
    reducer.bucket_bytes = size_t(config.distributed.bucket_mb * (1 << 20));
    reducer.first_bucket_bytes = size_t(config.distributed.first_bucket_mb * (1 << 20));
    reducer.range_alignment = kParameterAlignment;
    reducer.shard = config.distributed.zero_stage == 1;
    reducer.record_timeline = config.output.timeline;
    const AllreduceDtype wire = config.distributed.allreduce_dtype;
    reducer.wire = wire == AllreduceDtype::kBf16   ? ncclBfloat16
                   : wire == AllreduceDtype::kFp16 ? ncclFloat16
                                                   : ncclFloat32;
    make_gradient_sync = [&nccl, &backend, reducer](float* grads, size_t count) mutable {
      // The 16-bit copy of the gradients the all-reduce moves, in the arena.
      if (reducer.wire != ncclFloat32) reducer.wire_buffer = backend.alloc(count * 2);
      return std::unique_ptr<GradientSync>(std::make_unique<ReducerSync<mpi::NcclGradientReducer>>(
          *nccl, backend.stream(), grads, count, reducer));
    };
    out << "gradient " << (reducer.shard ? "reduce-scatter" : "all-reduce") << ": NCCL over "
        << ctx.world_size() << " GPUs in " << to_string(config.distributed.allreduce_dtype) << "\n";
  }
  Trainer<Act, float> trainer(config, ctx, backend, threads, out, make_gradient_sync);
  return trainer.run(options);
}

TrainResult train_on_cuda(Config config, mpi::Context& ctx, const TrainOptions& options,
                          int threads, std::ostream& out) {
  const int device = mpi::select_cuda_device(ctx);
  config.training.device = DeviceType::kCuda;
  config.precision.mode = cuda_precision(config.precision.mode, ctx, cuda_device_info(device));
  if (config.precision.mode == Precision::kBf16Mixed) {
    return train_with<__nv_bfloat16>(config, ctx, options, threads, device, out);
  }
  return train_with<__half>(config, ctx, options, threads, device, out);
}

}  // namespace
#endif

TrainResult train(const Config& config, mpi::Context& ctx, const TrainOptions& options,
                  std::ostream& log) {
  static std::ostream discard(nullptr);
  std::ostream& out = ctx.is_main() ? log : discard;
  out << "mpiasr train: " << ctx.describe() << "\n";
  out << "resolved config:\n";
  std::istringstream yaml(dump_config(config));
  for (std::string line; std::getline(yaml, line);) out << "  " << line << "\n";
  // A rank whose config is not rank 0's names the keys that differ, then every rank stops.
  Config main_config;
  apply_yaml(main_config, mpi::broadcast_bytes(ctx, dump_config(config)), "rank 0's config");
  std::ostringstream differences;
  for (const std::string& change : config_differences(main_config, config)) {
    differences << ctx.rank_name(ctx.world_rank()) << ": config differs from rank 0's: " << change
                << "\n";
  }
  std::cerr << differences.str() << std::flush;
  mpi::check_agreement(ctx, "config", config_hash(config));
  // Held until training returns; taken before anything is written.
  const std::optional<LockFile> output_lock = lock_output_dir(config, ctx, "train");

  const int threads = ctx.compute_threads(config.training.threads, "training.threads");
#ifdef MPIASR_WITH_CUDA
  if (config.training.device == DeviceType::kCuda ||
      (config.training.device == DeviceType::kAuto && every_rank_has_cuda(ctx))) {
    return train_on_cuda(config, ctx, options, threads, out);
  }
  if (config.precision.mode == Precision::kFp16Mixed ||
      config.precision.mode == Precision::kBf16Mixed) {
    MPIASR_FAIL(ExitCode::kUsage,
                "precision.mode = " << to_string(config.precision.mode)
                                    << " needs the CUDA backend (training.device = cuda, or "
                                       "auto with a GPU on every rank); this run trains in fp32 "
                                       "on the CPU (set precision.mode to fp32 or auto)");
  }
#else
  if (config.training.device == DeviceType::kCuda) {
    MPIASR_FAIL(ExitCode::kUsage,
                "training.device = cuda: this build trains on the CPU only; "
                "set training.device to cpu or auto");
  }
  if (config.precision.mode == Precision::kFp16Mixed ||
      config.precision.mode == Precision::kBf16Mixed) {
    MPIASR_FAIL(ExitCode::kUsage,
                "precision.mode = " << to_string(config.precision.mode)
                                    << " needs the CUDA backend; this build trains in fp32 on "
                                       "the CPU (set precision.mode to fp32 or auto)");
  }
#endif
  if (config.training.cuda_graphs) {
    MPIASR_FAIL(ExitCode::kUsage,
                "training.cuda_graphs = true needs the CUDA backend; this run "
                "trains on the CPU (set training.cuda_graphs to false)");
  }
  CpuBackend<float> backend(threads);
  out << "backend: " << backend.name() << " per rank\n";
  if (threads > ctx.default_threads()) {
    out << "note: training.threads = " << threads
        << " is more than this rank's share of its cores (" << ctx.default_threads()
        << "): ranks whose threads share a core wait for each other at "
        << "every parallel region (docs/scaling.md, \"Ranks and threads on one node\")\n";
  }
  Trainer<float, float> trainer(config, ctx, backend, threads, out);
  return trainer.run(options);
}

}  // namespace mpiasr
