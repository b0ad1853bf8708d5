// All-reduce speed over MPI, fp32 SUM, as the CPU trainer uses it:
//  - BM_MpiAllreduce/BYTES: one MPI_Allreduce of BYTES; algbw = bytes / time,
//    busbw = algbw * 2 (W - 1) / W (what a ring moves per rank, comparable
//    across world sizes, as nccl-tests reports it).
//  - BM_OneAllreduce/PARAMS versus BM_Reducer/PARAMS/...: a model's gradients
//    (PARAMS floats, 40 equal layers) summed by one MPI_Allreduce after
//    backward, or by the GradientReducer (bucket_kb buckets, 1 MB first) with
//    the layers marked in backward order. compute_us > 0 spins that many
//    microseconds per layer before marking it (a stand-in for backward), and
//    exposed_ms is the time finish() still blocked: what overlap did not hide;
//    hidden = 1 - exposed_ms / (the same with compute_us 0) is the share of
//    the all-reduce that backward hid. comm_cpu_ms is the CPU time of the
//    reducer's communication thread per step (the cost of its progress).
//    wire 0 sends fp32, 1 bf16, 2 fp16 (distributed.allreduce_dtype).
//  - BM_RoundToWire/N, BM_AddFromWire/N: the 16-bit messages' casts
//    (mpi/half_wire.h) over N floats, one thread, as the communication
//    thread makes them around every message; format 1 bf16, 2 fp16.
// Run by hand; every rank must run the same benchmarks, so iteration counts
// are fixed and rank 0 alone reports:
//   mpirun -np 2 build/allreduce_bench
//   mpirun -np 4 --oversubscribe build/allreduce_bench --benchmark_filter=Mpi
// and across fake nodes on the emulated cluster network (1 Gbit/s links):
//   scripts/fake-cluster-net.sh start 2
//   scripts/mpirun-fake-nodes.sh --ranks-per-node 1 --net mpiasr-net build/allreduce_bench
#include <benchmark/benchmark.h>
#include <mpi.h>

#include <chrono>
#include <optional>
#include <vector>

#include "mpi/context.h"
#include "mpi/gradient_reducer.h"
#include "mpi/runtime.h"

namespace {

using mpiasr::mpi::Context;
using mpiasr::mpi::GradientReducer;
using mpiasr::mpi::HalfWire;

// 0: fp32 messages; 1: bf16; 2: fp16.
std::optional<HalfWire> wire_of(int64_t arg) {
  if (arg == 0) return std::nullopt;
  return arg == 1 ? HalfWire::kBf16 : HalfWire::kFp16;
}

Context* g_ctx = nullptr;

double bus_factor() {
  const double w = g_ctx->world_size();
  return w > 1 ? 2 * (w - 1) / w : 1.0;
}

void spin_for_us(int64_t microseconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(microseconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}

void BM_MpiAllreduce(benchmark::State& state) {
  const size_t bytes = size_t(state.range(0));
  std::vector<float> data(bytes / sizeof(float), 1.0f);
  MPI_Barrier(g_ctx->world_comm());
  for (auto _ : state) {
    MPI_Allreduce(MPI_IN_PLACE, data.data(), int(data.size()), MPI_FLOAT, MPI_SUM,
                  g_ctx->world_comm());
  }
  const double per_second = double(bytes) * double(state.iterations());
  state.counters["algbw_GB/s"] = benchmark::Counter(per_second / 1e9, benchmark::Counter::kIsRate);
  state.counters["busbw_GB/s"] =
      benchmark::Counter(per_second * bus_factor() / 1e9, benchmark::Counter::kIsRate);
}

void BM_OneAllreduce(benchmark::State& state) {
  const size_t params = size_t(state.range(0));
  const int64_t compute_us = state.range(1);
  const size_t layers = 40, layer = params / layers;
  std::vector<float> grads(layers * layer, 1.0f);
  MPI_Barrier(g_ctx->world_comm());
  for (auto _ : state) {
    for (size_t l = 0; l < layers; ++l) spin_for_us(compute_us);
    MPI_Allreduce(MPI_IN_PLACE, grads.data(), int(grads.size()), MPI_FLOAT, MPI_SUM,
                  g_ctx->world_comm());
  }
  state.counters["MB"] = double(grads.size() * sizeof(float)) / 1e6;
}

void BM_Reducer(benchmark::State& state) {
  const size_t params = size_t(state.range(0));
  const int64_t compute_us = state.range(1);
  const size_t bucket_bytes = size_t(state.range(2)) << 10;
  const bool hierarchical = state.range(3) != 0;
  const size_t layers = 40, layer = params / layers;
  std::vector<float> grads(layers * layer, 1.0f);
  GradientReducer reducer(*g_ctx, grads.data(), grads.size(),
                          {.bucket_bytes = bucket_bytes,
                           .hierarchical = hierarchical,
                           .half_wire = wire_of(state.range(4))});
  double exposed = 0, comm_cpu = 0;
  MPI_Barrier(g_ctx->world_comm());
  for (auto _ : state) {
    reducer.begin_step();
    for (size_t l = layers; l-- > 0;) {
      spin_for_us(compute_us);
      reducer.on_grads_ready(l * layer, layer);
    }
    reducer.finish();
    exposed += reducer.last_wait_seconds();
    comm_cpu += reducer.last_comm_cpu_seconds();
  }
  state.counters["MB"] = double(grads.size() * sizeof(float)) / 1e6;
  state.counters["buckets"] = double(reducer.num_buckets());
  state.counters["exposed_ms"] = 1e3 * exposed / double(state.iterations());
  state.counters["comm_cpu_ms"] = 1e3 * comm_cpu / double(state.iterations());
}

BENCHMARK(BM_MpiAllreduce)
    ->RangeMultiplier(4)
    ->Range(4 << 10, 64 << 20)
    ->Iterations(20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
// 3.5 M parameters (the `small` preset's scale) and 30 M (`medium`); per-layer
// compute 0 (pure communication), 2.5 ms (100 ms of backward) or 20 ms (800
// ms, about the `small` preset's backward on one core).
BENCHMARK(BM_OneAllreduce)
    ->ArgsProduct({{3500000, 30000000}, {0, 2500}})
    ->Iterations(10)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Reducer)
    ->ArgsProduct({{3500000}, {0, 2500, 20000}, {1024, 2048, 25600}, {0, 1}, {0}})
    ->ArgsProduct({{3500000}, {0, 2500, 20000}, {1024}, {0, 1}, {1, 2}})
    ->ArgsProduct({{30000000}, {0, 2500}, {2048, 25600}, {0, 1}, {0}})
    ->ArgsProduct({{30000000}, {0, 2500}, {2048}, {0, 1}, {1}})
    ->ArgNames({"params", "compute_us", "bucket_kb", "hierarchical", "wire"})
    ->Iterations(10)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_RoundToWire(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  const HalfWire format = *wire_of(state.range(1));
  std::vector<float> values(n, 1.2345f);
  std::vector<uint16_t> wire(n);
  for (auto _ : state) {
    mpiasr::mpi::round_to_wire(format, wire.data(), values.data(), n);
    benchmark::DoNotOptimize(wire.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations() * n * (sizeof(float) * 2 + 2)));
}

void BM_AddFromWire(benchmark::State& state) {
  const size_t n = size_t(state.range(0));
  const HalfWire format = *wire_of(state.range(1));
  std::vector<float> values(n, 1.0f);
  std::vector<uint16_t> wire(n, 0);
  for (auto _ : state) {
    mpiasr::mpi::add_from_wire(format, values.data(), wire.data(), n);
    benchmark::DoNotOptimize(values.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations() * n * (sizeof(float) * 2 + 2)));
}

// 64 K floats (a bucket's part in L2) and 1.75 M (half the `small` preset's
// gradients: one ring round's part at 2 ranks).
BENCHMARK(BM_RoundToWire)
    ->ArgsProduct({{1 << 16, 1750000}, {1, 2}})
    ->ArgNames({"n", "format"})
    ->Iterations(50);
BENCHMARK(BM_AddFromWire)
    ->ArgsProduct({{1 << 16, 1750000}, {1, 2}})
    ->ArgNames({"n", "format"})
    ->Iterations(50);

// Rank 0 reports; the others run silently.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const benchmark::BenchmarkReporter::Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  mpiasr::mpi::Runtime runtime(&argc, &argv);
  Context ctx = Context::world();
  g_ctx = &ctx;
  benchmark::Initialize(&argc, argv);
  if (ctx.is_main()) {
    benchmark::AddCustomContext("mpi_world", ctx.describe());
    benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  return 0;
}
