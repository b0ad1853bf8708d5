// Training entry point: checks that the ranks agree, picks the backend and
// runs the loop of trainer_impl.h on it.
#include "src/trainer.h"

#include <iostream>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "mpi/agreement.h"
#include "src/trainer_impl.h"

namespace mpiasr {

template class Trainer<float, float>;

TrainResult train(const Config& config, mpi::Context& ctx, const TrainOptions& options,
                  std::ostream& log) {
  static std::ostream discard(nullptr);
  std::ostream& out = ctx.is_main() ? log : discard;
  out << "mpiasr train: " << ctx.describe() << "\n";
  out << "resolved config:\n";
  std::istringstream yaml(dump_config(config));
  for (std::string line; std::getline(yaml, line);) out << "  " << line << "\n";
  mpi::check_agreement(ctx, "config", config_hash(config));

  if (config.training.device == DeviceType::kCuda) {
    MPIASR_FAIL(ExitCode::kUsage,
                "training.device = cuda: this build trains on the CPU only; "
                "set training.device to cpu or auto");
  }
  if (config.precision.mode == Precision::kFp16Mixed) {
    MPIASR_FAIL(ExitCode::kUsage,
                "precision.mode = fp16-mixed needs the CUDA backend; this build "
                "trains in fp32 on the CPU (set precision.mode to fp32 or auto)");
  }
  const int threads = config.training.threads > 0 ? config.training.threads : ctx.default_threads();
  CpuBackend<float> backend(threads);
  out << "backend: " << backend.name() << " per rank\n";
  Trainer<float, float> trainer(config, ctx, backend, threads, out);
  return trainer.run(options);
}

}  // namespace mpiasr
