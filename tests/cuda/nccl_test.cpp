// NCCL bootstrapped over MPI (mpi/cuda/nccl_communicator.h) and the NCCL
// gradient reducer (mpi/cuda/nccl_gradient_reducer.h). ctest runs this as one
// process; tests/integration/nccl_gpus.sh runs it under mpirun with one rank
// per GPU, and tests/integration/nccl_emu.sh runs its emulation build
// (nccl_test_emu: kernels/cuda_emu's CUDA runtime and NCCL) at 2 and 4 ranks
// and on fake nodes. The device rule and the unique-id broadcast need no GPU;
// the rest skips without one, and the cases that need two ranks skip on one.
//
// Gradients are integers in [-1000, 1000], so every summation order gives the
// exact sum and the reduced values compare with ==; the 16-bit test draws
// fractions instead and checks the order of the sum (the emulator's, which is
// NCCL's ring order: kernels/cuda_emu/nccl.cpp) and its error bound.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#ifdef MPIASR_CUDA_EMU
#include "kernels/cuda_emu/memory_check.h"
#endif
#include "mpi/cuda/nccl_communicator.h"
#include "mpi/cuda/nccl_gradient_reducer.h"
#include "src/base/error.h"
#include "tests/base/random_floats.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/mpi/mpi_test_util.h"

namespace mpiasr::mpi {
namespace {

TEST(NcclBootstrap, DeviceIsLocalRankModuloDevices) {
  EXPECT_EQ(cuda_device_for_rank(0, 8, "rank 0"), 0);
  EXPECT_EQ(cuda_device_for_rank(3, 8, "rank 3"), 3);
  EXPECT_EQ(cuda_device_for_rank(9, 8, "rank 9"), 1);
  EXPECT_EQ(cuda_device_for_rank(1, 2, "rank 1"), 1);
}

// srun --gpus-per-task=1: every rank of a node sees one device, its own.
TEST(NcclBootstrap, ARankThatSeesOneDeviceUsesIt) {
  for (int local_rank = 0; local_rank < 8; ++local_rank) {
    EXPECT_EQ(cuda_device_for_rank(local_rank, 1, "rank"), 0) << local_rank;
  }
}

TEST(NcclBootstrap, NoVisibleDeviceIsAClearError) {
  try {
    cuda_device_for_rank(2, 0, "rank 6 (nodeB)");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("rank 6 (nodeB) sees no CUDA device"), std::string::npos)
        << e.what();
  }
}

// Only the same bus id twice on a node is a conflict, wherever the pair is.
TEST(NcclBootstrap, SharedDeviceIsFoundByBusId) {
  using Pair = std::optional<std::pair<int, int>>;
  EXPECT_EQ(first_shared_device({}), Pair());
  EXPECT_EQ(first_shared_device({"0000:3b:00.0"}), Pair());
  EXPECT_EQ(first_shared_device({"0000:3b:00.0", "0000:5e:00.0", "0000:86:00.0"}), Pair());
  EXPECT_EQ(first_shared_device({"0000:3b:00.0", "0000:5e:00.0", "0000:3b:00.0"}), Pair({0, 2}));
  EXPECT_EQ(first_shared_device({"a", "b", "c", "c", "a"}), Pair({2, 3}));
  // Eight ranks of one node each seeing the 8 GPUs (local rank % 8): distinct;
  // a ninth rank wraps around onto the first rank's GPU.
  std::vector<std::string> ids;
  for (int rank = 0; rank < 9; ++rank) {
    ids.push_back("0000:" + std::to_string(cuda_device_for_rank(rank, 8, "rank")) + ":00.0");
  }
  EXPECT_EQ(first_shared_device(std::vector<std::string>(ids.begin(), ids.end() - 1)), Pair());
  EXPECT_EQ(first_shared_device(ids), Pair({0, 8}));
}

// ncclGetUniqueId needs no GPU: rank 0 makes the id, every rank ends with its bytes.
TEST(NcclBootstrap, UniqueIdReachesEveryRankFromRankZero) {
  const Context ctx = test::test_context();
  const ncclUniqueId id = broadcast_nccl_unique_id(ctx, ctx.world_comm());
  std::vector<char> all(sizeof id * size_t(ctx.world_size()));
  ASSERT_EQ(MPI_Allgather(&id, int(sizeof id), MPI_BYTE, all.data(), int(sizeof id), MPI_BYTE,
                          ctx.world_comm()),
            MPI_SUCCESS);
  for (int r = 0; r < ctx.world_size(); ++r) {
    EXPECT_EQ(std::memcmp(all.data() + sizeof id * size_t(r), all.data(), sizeof id), 0)
        << "rank " << r;
  }
  const ncclUniqueId zero{};
  EXPECT_NE(std::memcmp(&id, &zero, sizeof id), 0);
}

TEST(NcclBootstrap, SelectsTheDeviceOfItsLocalRank) {
  MPIASR_SKIP_WITHOUT_CUDA();
  const Context ctx = test::test_context();
  const int device = select_cuda_device(ctx);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, device);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(device, ctx.local_rank() % count);
}

// Polls ncclCommGetAsyncError while it answers ncclInProgress (at most 60 s);
// returns the last answer.
ncclResult_t poll_comm(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess) return ncclInternalError;
  }
  return state;
}

// A non-blocking init answers ncclInProgress while a rank has not joined (the
// last rank joins only after the others have seen it), and succeeds once all
// have; a blocking init returns when all have joined.
TEST(NcclBootstrap, InitWaitsForEveryRankBlockingOrNot) {
  MPIASR_SKIP_WITHOUT_CUDA();
  const Context ctx = test::test_context();
  if (ctx.world_size() < 2) GTEST_SKIP() << "needs 2 ranks or more";
  (void)select_cuda_device(ctx);
  const int rank = ctx.world_rank(), size = ctx.world_size();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclUniqueId id = broadcast_nccl_unique_id(ctx, ctx.world_comm());
  if (rank == size - 1) {
    ASSERT_EQ(MPI_Barrier(ctx.world_comm()), MPI_SUCCESS);
  }
  const ncclResult_t started = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  if (rank < size - 1) {
    EXPECT_EQ(started, ncclInProgress);
    ncclResult_t state = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    EXPECT_EQ(state, ncclInProgress);
    ASSERT_EQ(MPI_Barrier(ctx.world_comm()), MPI_SUCCESS);
  }
  EXPECT_EQ(poll_comm(comm), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);

  config.blocking = 1;
  const ncclUniqueId second = broadcast_nccl_unique_id(ctx, ctx.world_comm());
  EXPECT_EQ(ncclCommInitRankConfig(&comm, size, second, rank, &config), ncclSuccess);
  EXPECT_EQ(poll_comm(comm), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// What the cases on GPUs start from: the test context, this rank's device
// (current), a backend on it and the world communicator.
struct NcclSetup {
  const Context ctx = test::test_context();
  CudaBackend<__half> be{CudaBackendOptions{.device = select_cuda_device(ctx),
                                            .arena_bytes = cuda_test::kTestArenaBytes}};
  NcclCommunicator world = NcclCommunicator::create(ctx, ctx.world_comm(), "world");
};

// rank r contributes r + 1 + i at element i: the sum is size (size + 1) / 2 + size i.
TEST(NcclBootstrap, WorldAndNodeCommunicatorsSum) {
  MPIASR_SKIP_WITHOUT_CUDA();
  NcclSetup setup;
  auto& [ctx, be, world] = setup;
  NcclCommunicator node = NcclCommunicator::create(ctx, ctx.node_comm(), "node");
  EXPECT_EQ(world.size(), ctx.world_size());
  EXPECT_EQ(world.rank(), ctx.world_rank());
  EXPECT_EQ(node.size(), ctx.local_size());
  EXPECT_EQ(node.rank(), ctx.local_rank());

  const size_t n = 100003;
  for (NcclCommunicator* comm : {&world, &node}) {
    std::vector<float> values(n);
    for (size_t i = 0; i < n; ++i) values[i] = float(comm->rank() + 1) + float(i % 1000);
    auto data = cuda_test::upload_float(be, values);
    comm->complete(
        ncclAllReduce(data->get(), data->get(), n, ncclFloat32, ncclSum, comm->get(), be.stream()),
        "test all-reduce");
    const std::vector<float> sums = cuda_test::download(be, data->get(), n);
    const int size = comm->size();
    for (size_t i = 0; i < n; i += 997) {
      ASSERT_EQ(sums[i], float(size * (size + 1) / 2) + float(size) * float(i % 1000))
          << comm->name() << " element " << i;
    }
  }
}

// The reducer tests' largest layer: smaller on the emulator, where every
// bucket's casts are emulated kernels.
constexpr size_t kLargeLayer = cuda_test::kEmulated ? 3000 : 100000;

struct Layout {
  std::vector<std::pair<size_t, size_t>> layers;  // offset, count (padded to 64)
  size_t total = 0;
};

Layout make_layout(const std::vector<size_t>& sizes) {
  Layout layout;
  for (size_t size : sizes) {
    layout.layers.push_back({layout.total, size});
    layout.total += (size + 63) / 64 * 64;
  }
  return layout;
}

// Integers in [-limit, limit]: their sums over the ranks are exact in fp32,
// and in bf16 and fp16 when limit x ranks stays within 256.
std::vector<float> integer_grads(const Layout& layout, uint32_t seed, int rank, int limit = 1000) {
  std::mt19937 generator(seed * 7919u + uint32_t(rank));
  std::uniform_int_distribution<int> value(-limit, limit);
  std::vector<float> grads(layout.total, 0.0f);
  for (auto [offset, count] : layout.layers) {
    for (size_t i = 0; i < count; ++i) grads[offset + i] = float(value(generator));
  }
  return grads;
}

// One step of `reducer` on this rank's integer_grads(layout, seed, limit):
// the layers copied into grads in backward order while they are marked (an
// async copy per layer on the compute stream, just before its mark), then
// finish(). Returns what the sums over the ranks must be.
std::vector<float> reduce_one_step(CudaBackend<__half>& be, NcclGradientReducer& reducer,
                                   const Layout& layout, float* grads, float* staged,
                                   const Context& ctx, uint32_t seed, int limit) {
  const std::vector<float> mine = integer_grads(layout, seed, ctx.world_rank(), limit);
  be.to_device(staged, mine.data(), mine.size() * sizeof(float));
  be.zero(grads, layout.total * sizeof(float));
  reducer.begin_step();
  for (auto it = layout.layers.rbegin(); it != layout.layers.rend(); ++it) {
    be.copy(grads + it->first, staged + it->first, it->second * sizeof(float));
    reducer.on_grads_ready(it->first, it->second);
  }
  reducer.finish();
  std::vector<float> expected(layout.total, 0.0f);
  for (int r = 0; r < ctx.world_size(); ++r) {
    const std::vector<float> theirs = integer_grads(layout, seed, r, limit);
    for (size_t i = 0; i < layout.total; ++i) expected[i] += theirs[i];
  }
  return expected;
}

// Layers marked in backward order while the compute stream is still writing
// them (an async copy per layer, just before its mark), bucket sizes from one
// element to more than the buffer, two steps each; in fp32 and on the 16-bit
// wires, whose integer sums are exact too. In fp32 with the step's timeline
// recorded (test::expect_step_timeline), on the 16-bit wires without.
TEST(NcclGradientReducer, SumsEveryBucketOverRanksAfterBackwardWrites) {
  MPIASR_SKIP_WITHOUT_CUDA();
  NcclSetup setup;
  auto& [ctx, be, world] = setup;
  const Layout layout = make_layout({300, 5, 4096, 70, 1, kLargeLayer, 64, 999});
  cuda_test::DeviceArray<float> grads(be, layout.total), staged(be, layout.total);
  cuda_test::DeviceArray<__half> wire_buffer(be, layout.total);
  const int limit16 = std::max(1, 256 / ctx.world_size());

  for (ncclDataType_t wire : {ncclFloat32, ncclBfloat16, ncclFloat16}) {
    const int limit = wire == ncclFloat32 ? 1000 : limit16;
    for (size_t bucket_bytes : {size_t(4), size_t(1024), size_t(100000), size_t(1) << 24}) {
      NcclReducerOptions options;
      options.bucket_bytes = bucket_bytes;
      options.first_bucket_bytes = std::min<size_t>(bucket_bytes, 256);
      options.range_alignment = 64;
      options.wire = wire;
      options.wire_buffer = wire == ncclFloat32 ? nullptr : wire_buffer.get();
      options.record_timeline = wire == ncclFloat32;
      NcclGradientReducer reducer(world, be.stream(), grads.get(), layout.total, options);
      for (uint32_t step = 0; step < 2; ++step) {
        const auto before = std::chrono::steady_clock::now();
        const std::vector<float> expected =
            reduce_one_step(be, reducer, layout, grads.get(), staged.get(), ctx,
                            uint32_t(bucket_bytes) + step, limit);
        const auto after = std::chrono::steady_clock::now();
        EXPECT_EQ(cuda_test::download(be, grads.get(), layout.total), expected)
            << "wire " << int(wire) << " bucket_bytes " << bucket_bytes << " step " << step;
        if (options.record_timeline) {
          test::expect_step_timeline(reducer, before, after);
        } else {
          EXPECT_TRUE(reducer.last_timeline().empty());
        }
      }
      EXPECT_GE(reducer.num_buckets(), 1u);
    }
  }
}

// x rounded to the wire type and back.
template <typename Wire>
float round_to_wire(double x) {
  if constexpr (std::is_same_v<Wire, __half>) {
    return __half2float(__float2half_rn(float(x)));
  } else {
    return __bfloat162float(__float2bfloat16_rn(float(x)));
  }
}

// NCCL's ring all-reduce of terms[rank][i] over n ranks, brute force: the
// buffer is cut into n equal chunks (the last one shorter); chunk c's sum
// starts at rank c + 1 and adds the next rank's term at every hop round the
// ring, ending with rank c's, each partial sum rounded to the wire type.
template <typename Wire>
std::vector<float> ring_order_sum(const std::vector<std::vector<float>>& terms) {
  const size_t n = terms.size(), count = terms[0].size(), chunk = (count + n - 1) / n;
  std::vector<float> sums(count);
  for (size_t i = 0; i < count; ++i) {
    const size_t c = i / chunk;
    double sum = terms[(c + 1) % n][i];
    for (size_t hop = 2; hop <= n; ++hop) sum = round_to_wire<Wire>(sum + terms[(c + hop) % n][i]);
    sums[i] = float(sum);
  }
  return sums;
}

// The 16-bit all-reduce of one bucket: every partial sum is rounded to the
// wire type, so against the exact sum of the fp32 gradients the error is at
// most n u sum |x| (u the wire's unit roundoff: 2^-11 fp16, 2^-8 bf16): one
// rounding of each term to the wire, n - 1 roundings of partial sums no
// larger than sum |x|. On the emulator the sums are exactly NCCL's ring order
// (ring_order_sum), which at 3 ranks or more differs somewhere from the
// rank-order sum, so the check tells the orders apart.
template <typename Wire>
void check_sixteen_bit_all_reduce(ncclDataType_t wire, double unit_roundoff) {
  NcclSetup setup;
  auto& [ctx, be, world] = setup;
  const size_t count = 1001, n = size_t(ctx.world_size());
  std::vector<std::vector<float>> grads, rounded;
  for (size_t r = 0; r < n; ++r) {
    grads.push_back(testing::random_floats(count, 40 + r));
    rounded.push_back(grads.back());
    for (float& x : rounded.back()) x = round_to_wire<Wire>(x);
  }
  cuda_test::DeviceArray<Wire> wire_buffer(be, count);
  auto data = cuda_test::upload_float(be, grads[size_t(ctx.world_rank())]);
  NcclReducerOptions options;
  options.bucket_bytes = options.first_bucket_bytes = count * sizeof(float);
  options.wire = wire;
  options.wire_buffer = wire_buffer.get();
  NcclGradientReducer reducer(world, be.stream(), data->get(), count, options);
  ASSERT_EQ(reducer.num_buckets(), 1u);
  reducer.begin_step();
  reducer.on_grads_ready(0, count);
  reducer.finish();
  const std::vector<float> sums = cuda_test::download(be, data->get(), count);

  for (size_t i = 0; i < count; ++i) {
    double exact = 0, magnitude = 0;
    for (size_t r = 0; r < n; ++r) {
      exact += grads[r][i];
      magnitude += std::fabs(grads[r][i]);
    }
    ASSERT_LE(std::fabs(sums[i] - exact), double(n) * unit_roundoff * magnitude * 1.01)
        << "element " << i << " of " << count << ", " << n << " ranks";
  }
  if (!cuda_test::kEmulated) return;
  EXPECT_EQ(sums, ring_order_sum<Wire>(rounded));
  if (n < 3) return;
  std::vector<float> rank_order(count);
  for (size_t i = 0; i < count; ++i) {
    double sum = rounded[0][i];
    for (size_t r = 1; r < n; ++r) sum = round_to_wire<Wire>(sum + rounded[r][i]);
    rank_order[i] = float(sum);
  }
  EXPECT_NE(rank_order, ring_order_sum<Wire>(rounded));
}

TEST(NcclGradientReducer, Fp16AllReduceRoundsEveryHopOfTheRing) {
  MPIASR_SKIP_WITHOUT_CUDA();
  check_sixteen_bit_all_reduce<__half>(ncclFloat16, std::ldexp(1.0, -11));
}

TEST(NcclGradientReducer, Bf16AllReduceRoundsEveryHopOfTheRing) {
  MPIASR_SKIP_WITHOUT_CUDA();
  check_sixteen_bit_all_reduce<__nv_bfloat16>(ncclBfloat16, std::ldexp(1.0, -8));
}

// ncclBroadcast from the last rank, and an all-reduce and an all-gather issued
// together between ncclGroupStart and ncclGroupEnd.
TEST(NcclCollectives, BroadcastAndGroupedCalls) {
  MPIASR_SKIP_WITHOUT_CUDA();
  NcclSetup setup;
  auto& [ctx, be, world] = setup;
  const int size = world.size(), rank = world.rank(), root = size - 1;
  const size_t n = 37;
  std::vector<float> mine(n);
  for (size_t i = 0; i < n; ++i) mine[i] = float(rank * 100) + float(i);
  auto sent = cuda_test::upload_float(be, mine);
  cuda_test::DeviceArray<float> received(be, n), summed(be, n), gathered(be, n * size_t(size));
  world.complete(
      ncclBroadcast(sent->get(), received.get(), n, ncclFloat32, root, world.get(), be.stream()),
      "test broadcast");
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  world.complete(
      ncclAllReduce(sent->get(), summed.get(), n, ncclFloat32, ncclSum, world.get(), be.stream()),
      "test grouped all-reduce");
  world.complete(
      ncclAllGather(sent->get(), gathered.get(), n, ncclFloat32, world.get(), be.stream()),
      "test grouped all-gather");
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  world.wait([] { return true; }, "test group");

  const std::vector<float> got_broadcast = cuda_test::download(be, received.get(), n);
  const std::vector<float> got_sum = cuda_test::download(be, summed.get(), n);
  const std::vector<float> got_gather = cuda_test::download(be, gathered.get(), n * size_t(size));
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(got_broadcast[i], float(root * 100) + float(i)) << i;
    ASSERT_EQ(got_sum[i], float(100 * size * (size - 1) / 2) + float(size) * float(i)) << i;
    for (int r = 0; r < size; ++r) {
      ASSERT_EQ(got_gather[size_t(r) * n + i], float(r * 100) + float(i)) << r << " " << i;
    }
  }
}

#ifdef MPIASR_CUDA_EMU
// On the emulator under initcheck (kernels/cuda_emu/memory_check.h): what a
// collective writes into its receive buffer counts as written, so a kernel
// reads an all-reduced, all-gathered or broadcast buffer that nothing else
// wrote, while one nothing wrote still fails.
TEST(NcclCollectives, EmulatedCollectivesWritesCountForInitcheck) {
  emu::set_initcheck(true);
  struct InitcheckOff {
    ~InitcheckOff() { emu::set_initcheck(false); }
  } initcheck_off;
  NcclSetup setup;
  auto& [ctx, be, world] = setup;
  const size_t n = 37, size = size_t(world.size());
  cuda_test::DeviceArray<float> sent(be, n), summed(be, n), gathered(be, n * size), received(be, n),
      unwritten(be, n);
  cuda_test::DeviceArray<__half> out(be, n * size);
  be.zero(sent.get(), n * sizeof(float));
  world.complete(
      ncclAllReduce(sent.get(), summed.get(), n, ncclFloat32, ncclSum, world.get(), be.stream()),
      "test all-reduce");
  world.complete(
      ncclAllGather(sent.get(), gathered.get(), n, ncclFloat32, world.get(), be.stream()),
      "test all-gather");
  world.complete(
      ncclBroadcast(sent.get(), received.get(), n, ncclFloat32, 0, world.get(), be.stream()),
      "test broadcast");
  EXPECT_NO_THROW({
    be.cast_acc_to_act(out.get(), summed.get(), n);
    be.cast_acc_to_act(out.get(), gathered.get(), n * size);
    be.cast_acc_to_act(out.get(), received.get(), n);
    be.synchronize();
  });
  EXPECT_THROW(
      {
        be.cast_acc_to_act(out.get(), unwritten.get(), n);
        be.synchronize();
      },
      Error);
}
#endif

// Sharded (ZeRO-1): after finish() each rank holds the sums of its pieces,
// in fp32 and through a bf16 wire; sum_over_ranks sums a device double over
// the ranks; gather_parameters gives every rank every rank's pieces, in place.
TEST(NcclGradientReducer, ShardedReduceScatterNormAndParameterGather) {
  MPIASR_SKIP_WITHOUT_CUDA();
  NcclSetup setup;
  auto& [ctx, be, world] = setup;
  const size_t W = size_t(ctx.world_size());
  std::vector<size_t> sizes = {300, 5, 4096, 70, 1, kLargeLayer, 64, 999};
  Layout layout = make_layout(sizes);
  // Padded to whole pieces, as the parameter store pads a sharded buffer.
  const size_t multiple = W * 64;
  if (layout.total % multiple != 0) {
    sizes.push_back(multiple - layout.total % multiple);
    layout = make_layout(sizes);
  }
  cuda_test::DeviceArray<float> grads(be, layout.total), staged(be, layout.total);
  cuda_test::DeviceArray<__half> wire_buffer(be, layout.total);
  const int limit16 = std::max(1, 256 / ctx.world_size());

  for (ncclDataType_t wire : {ncclFloat32, ncclBfloat16}) {
    const int limit = wire == ncclFloat32 ? 1000 : limit16;
    NcclReducerOptions options;
    options.bucket_bytes = 100000;
    options.first_bucket_bytes = 256;
    options.range_alignment = 64;
    options.wire = wire;
    options.wire_buffer = wire == ncclFloat32 ? nullptr : wire_buffer.get();
    options.shard = true;
    NcclGradientReducer reducer(world, be.stream(), grads.get(), layout.total, options);
    const std::vector<float> expected =
        reduce_one_step(be, reducer, layout, grads.get(), staged.get(), ctx, 17, limit);
    const std::vector<float> got = cuda_test::download(be, grads.get(), layout.total);
    const auto pieces = reducer.plan().shard_pieces(size_t(ctx.world_rank()));
    ASSERT_EQ(pieces.size(), reducer.num_buckets());
    for (const auto& piece : pieces) {
      for (size_t i = piece.offset; i < piece.offset + piece.count; ++i) {
        ASSERT_EQ(got[i], expected[i]) << "wire " << int(wire) << " element " << i;
      }
    }

    cuda_test::DeviceArray<double> value(be, 1);
    const double rank_value = ctx.world_rank() + 1.0;
    be.to_device(value.get(), &rank_value, sizeof(double));
    reducer.sum_over_ranks(value.get());
    double sum = 0.0;
    be.to_host(&sum, value.get(), sizeof(double));
    EXPECT_EQ(sum, double(W) * double(W + 1) / 2);

    // Element i holds i on the rank that owns it and -1 elsewhere.
    std::vector<float> params(layout.total, -1.0f);
    for (const auto& piece : pieces) {
      for (size_t i = piece.offset; i < piece.offset + piece.count; ++i) params[i] = float(i);
    }
    be.to_device(staged.get(), params.data(), params.size() * sizeof(float));
    reducer.gather_parameters(staged.get());
    const std::vector<float> gathered = cuda_test::download(be, staged.get(), layout.total);
    for (size_t i = 0; i < layout.total; ++i) {
      ASSERT_EQ(gathered[i], float(i)) << "wire " << int(wire) << " element " << i;
    }
  }
}

}  // namespace
}  // namespace mpiasr::mpi

#include "tests/mpi/mpi_test_main.h"
