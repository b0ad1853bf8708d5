// Step graphs (CudaBackend::queue_as_graph, DESIGN.md "Step graphs"): a
// micro-batch's forward and backward queued as a graph trains exactly as
// queued eagerly (the same kernels on the same data: bit-identical weights
// and loss sums) over batches of two shapes, each shape captured once and
// replayed with the next batch's host arguments (lengths, targets, dropout
// seed, features) without the host waiting for the device; work that
// differs in anything the kernels are given gets a graph of its own, a field
// of a struct argument included; and what a graph cannot hold is refused by
// name.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/call_counts.h"
#include "kernels/cuda/padding_free.h"
#include "kernels/cuda/step_graph.h"
#include "model/conformer.h"
#include "src/base/error.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/training_step.h"
#include "tests/model/random_batch.h"

namespace mpiasr {
namespace {

MPIASR_CUDA_TYPED_SUITE(StepGraph);

// A model of `tiny`'s structure, narrow for the emulator, with dropout.
ConformerConfig graph_config() {
  ConformerConfig config = conformer_preset("tiny");
  config.vocab_size = 12;
  config.dropout = 0.1f;
  return config;
}

// What training `batches` in turn leaves: the master weights and the loss sum.
struct Trained {
  std::vector<float> weights;
  double loss_sum = 0;
  int applied = 0;
  StepGraphCounts graphs;
  uint64_t graph_launches = 0;
  std::vector<uint64_t> host_waits;  // per step
};

template <typename Act>
Trained train(const std::vector<HostBatch>& batches, bool graphs) {
  CudaBackend<Act>& gpu = cuda_test::backend<Act>();
  cuda_test::queries_answer_as_a_gpu_that_keeps_up();
  cuda_test::TrainingStep<Act> training(gpu, graph_config());
  const StepGraphCounts before = gpu.step_graph_counts();
  reset_cuda_call_counts();
  Trained trained;
  for (size_t step = 0; step < batches.size(); ++step) {
    const uint64_t waits_before = cuda_call_counts().host_waits;
    if (graphs) {
      training.run(batches[step], 1000 + step,
                   [&](const std::function<void()>& queue) { gpu.queue_as_graph(queue); });
    } else {
      training.run(batches[step], 1000 + step);
    }
    trained.host_waits.push_back(cuda_call_counts().host_waits - waits_before);
  }
  trained.graph_launches = cuda_call_counts().graph_launches;
  const StepControl control = training.optimizer.read_control();
  trained.loss_sum = control.loss_sum;
  trained.applied = int(control.optimizer_step);
  trained.weights.resize(training.model.params().size());
  gpu.to_host(trained.weights.data(), training.model.params().master(),
              trained.weights.size() * sizeof(float));
  const StepGraphCounts after = gpu.step_graph_counts();
  trained.graphs = {after.captures - before.captures, after.replays - before.replays};
  return trained;
}

TYPED_TEST(StepGraph, TrainsBitIdenticallyToEagerStepsOneGraphPerShape) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  // Two shapes (3 x 83 and 2 x 64 frames); within a shape the lengths,
  // targets, features (the batch seed) and dropout seed (the step) differ.
  const std::vector<HostBatch> batches = {
      testing::random_batch({83, 60, 47}, {{1, 2, 3, 3, 4, 11}, {5, 5, 6, 7}, {8, 9, 10}}, 83, 17,
                            0),
      testing::random_batch({64, 40}, {{2, 4, 6}, {1, 3, 5, 7, 9}}, 64, 18, 1),
      testing::random_batch({50, 83, 71}, {{7, 7, 2}, {1, 2, 3, 4, 5, 6, 7}, {11, 10}}, 83, 19, 2),
      testing::random_batch({31, 64}, {{3}, {4, 4, 8, 8}}, 64, 20, 3),
      testing::random_batch({83, 83, 20}, {{9, 1}, {2, 2, 2}, {5}}, 83, 21, 4),
  };
  const Trained eager = train<Act>(batches, false);
  const Trained graphed = train<Act>(batches, true);
  EXPECT_EQ(eager.graphs.captures + eager.graphs.replays, 0u);
  EXPECT_EQ(graphed.graphs.captures, 2u) << "one graph per batch shape";
  EXPECT_EQ(graphed.graphs.replays, 3u);
  EXPECT_EQ(graphed.graph_launches, 5u);
  for (size_t step = 2; step < batches.size(); ++step) {
    EXPECT_EQ(graphed.host_waits[step], 0u) << "a replayed step, " << step;
  }
  EXPECT_EQ(eager.graph_launches, 0u);
  EXPECT_GT(eager.applied, 0);
  EXPECT_EQ(graphed.applied, eager.applied);
  EXPECT_GT(eager.loss_sum, 0.0);
  EXPECT_EQ(graphed.loss_sum, eager.loss_sum);
  ASSERT_EQ(graphed.weights.size(), eager.weights.size());
  size_t differing = 0;
  for (size_t i = 0; i < eager.weights.size(); ++i) {
    if (std::memcmp(&graphed.weights[i], &eager.weights[i], sizeof(float)) != 0) ++differing;
  }
  EXPECT_EQ(differing, 0u) << "of " << eager.weights.size() << " weights";
}

// mask_padding with new lengths each time: one graph, and each replay masks
// by its own lengths (they reach the graph as host arguments).
TYPED_TEST(StepGraph, ReplaysReadEachCallsHostArgumentsAndNewWorkGetsItsOwnGraph) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& gpu = cuda_test::backend<Act>();
  constexpr int B = 3, T = 9, C = 5;
  cuda_test::DeviceArray<Act> x(gpu, size_t(B) * T * C);
  const std::vector<Act> ones(size_t(B) * T * C, cuda_test::host_act<Act>(1.0f));
  const std::vector<std::vector<int32_t>> lengths = {{9, 4, 0}, {1, 9, 7}, {3, 3, 3}};
  const StepGraphCounts before = gpu.step_graph_counts();
  for (const std::vector<int32_t>& L : lengths) {
    gpu.to_device(x.get(), ones.data(), ones.size() * sizeof(Act));
    gpu.queue_as_graph([&] { gpu.mask_padding(x.get(), L.data(), B, T, C); });
    std::vector<Act> masked(ones.size());
    gpu.to_host(masked.data(), x.get(), masked.size() * sizeof(Act));
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < T; ++t) {
        for (int c = 0; c < C; ++c) {
          ASSERT_EQ(cuda_test::host_float(masked[(size_t(b) * T + t) * C + c]),
                    t < L[size_t(b)] ? 1.0f : 0.0f)
              << "lengths " << L[0] << " " << L[1] << " " << L[2] << ", b " << b << ", t " << t;
        }
      }
    }
  }
  // Fewer utterances: other work, another graph.
  gpu.queue_as_graph([&] { gpu.mask_padding(x.get(), lengths[0].data(), B - 1, T, C); });
  gpu.synchronize();
  const StepGraphCounts after = gpu.step_graph_counts();
  EXPECT_EQ(after.captures - before.captures, 2u);
  EXPECT_EQ(after.replays - before.replays, 2u);
}

// Layer norm's eps reaches its kernel inside a struct (ForwardArgs): a new
// eps is other work, a graph of its own, and each graph's rstd is
// 1 / sqrt(var + eps) of its own eps.
TYPED_TEST(StepGraph, AChangedFieldOfAStructArgumentGetsItsOwnGraph) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& gpu = cuda_test::backend<Act>();
  constexpr int N = 3, C = 8;
  std::vector<float> x(size_t(N) * C);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 7 % 5) - 2);
  auto d_x = cuda_test::upload<Act>(gpu, x);
  cuda_test::DeviceArray<Act> out(gpu, x.size());
  cuda_test::DeviceArray<float> mean(gpu, N), rstd(gpu, N);
  const StepGraphCounts before = gpu.step_graph_counts();
  for (float eps : {1e-5f, 0.5f}) {
    gpu.queue_as_graph([&] {
      gpu.layernorm_forward(out.get(), mean.get(), rstd.get(), d_x->get(), nullptr, nullptr, N, C,
                            eps);
    });
    const std::vector<float> got = cuda_test::download(gpu, rstd.get(), N);
    for (int n = 0; n < N; ++n) {
      double sum = 0, squares = 0;
      for (int c = 0; c < C; ++c) sum += x[size_t(n) * C + c];
      for (int c = 0; c < C; ++c) squares += std::pow(x[size_t(n) * C + c] - sum / C, 2);
      const double expected = 1 / std::sqrt(squares / C + eps);
      EXPECT_NEAR(got[size_t(n)], expected, 1e-5 * expected) << "eps " << eps << ", row " << n;
    }
  }
  const StepGraphCounts after = gpu.step_graph_counts();
  EXPECT_EQ(after.captures - before.captures, 2u);
  EXPECT_EQ(after.replays - before.replays, 0u);
}

// A launch's struct argument is signed by its bytes: a changed field changes
// the signature; the same values sign alike.
struct SignedArguments {
  const float* x;
  int n;
  float scale;
};

// Only a struct without padding can be (kernels/cuda/padding_free.h); the
// sizes counted by hand (8-byte pointers and doubles, 4-byte int and float).
struct FlagFirst {
  bool active;  // 3 bytes of padding after it
  int n;
};
struct FlagLast {
  const float* x;
  int n;
  bool active;  // 3 bytes of padding after it
};
struct WithArray {
  float v[3];
  int n;
};
struct WithPaddedArray {
  char v[3];  // 1 byte of padding after it
  float f;
};
struct WithStruct {
  SignedArguments arguments;
  double d;
};
struct WithPaddedStruct {
  FlagFirst inner;  // its padding is the outer struct's
  int n;
};
struct Empty {};
struct WithEmpty {
  Empty empty;  // a byte that holds nothing: padding
  char c;
};

static_assert(cuda_detail::member_count<SignedArguments>() == 3);
static_assert(cuda_detail::member_count<WithArray>() == 2, "an array is one member");
static_assert(cuda_detail::member_count<WithPaddedStruct>() == 2, "a struct is one member");
static_assert(cuda_detail::member_bytes<SignedArguments>() == 16);
static_assert(cuda_detail::member_bytes<FlagFirst>() == 5 && sizeof(FlagFirst) == 8);
static_assert(cuda_detail::member_bytes<FlagLast>() == 13 && sizeof(FlagLast) == 16);
static_assert(cuda_detail::member_bytes<WithArray>() == 16);
static_assert(cuda_detail::member_bytes<WithPaddedArray>() == 7 && sizeof(WithPaddedArray) == 8);
static_assert(cuda_detail::member_bytes<WithStruct>() == 24);
static_assert(cuda_detail::member_bytes<WithPaddedStruct>() == 9);
static_assert(cuda_detail::member_bytes<Empty>() == 0);
static_assert(cuda_detail::padding_free<SignedArguments> && cuda_detail::padding_free<WithArray> &&
              cuda_detail::padding_free<WithStruct>);
static_assert(!cuda_detail::padding_free<FlagFirst> && !cuda_detail::padding_free<FlagLast> &&
              !cuda_detail::padding_free<WithPaddedArray> &&
              !cuda_detail::padding_free<WithPaddedStruct> &&
              !cuda_detail::padding_free<WithEmpty>);

template <typename Arguments>
uint64_t dry_signature(const Arguments& arguments) {
  cuda_detail::graph_pass = GraphPass::kDry;
  cuda_detail::graph_signature = 0;
  EXPECT_FALSE(cuda_detail::sign_launch("kernel", dim3(1), dim3(32), 0, arguments));
  cuda_detail::graph_pass = GraphPass::kEager;
  return cuda_detail::graph_signature;
}

TEST(StepGraphSignature, StructArgumentsAreSignedByTheirBytes) {
  const float x = 1.0f;
  const SignedArguments arguments{&x, 5, 1.0f};
  SignedArguments other_n = arguments, other_scale = arguments, other_x = arguments;
  other_n.n = 6;
  other_scale.scale = 2.0f;
  other_x.x = &x + 1;
  const uint64_t signature = dry_signature(arguments);
  EXPECT_EQ(dry_signature(SignedArguments{&x, 5, 1.0f}), signature);
  EXPECT_NE(dry_signature(other_n), signature);
  EXPECT_NE(dry_signature(other_scale), signature);
  EXPECT_NE(dry_signature(other_x), signature);
}

TYPED_TEST(StepGraph, RefusesReadsBackAndCopiesInsideAGraph) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& gpu = cuda_test::backend<Act>();
  cuda_test::DeviceArray<float> x(gpu, 4);
  float host[4] = {1, 2, 3, 4};
  const auto refused = [&](const std::function<void()>& queue) {
    try {
      gpu.queue_as_graph(queue);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("not refused");
  };
  EXPECT_NE(refused([&] {
              gpu.to_host(host, x.get(), sizeof host);
            }).find("to_host inside queue_as_graph"),
            std::string::npos);
  EXPECT_NE(refused([&] {
              gpu.to_device(x.get(), host, sizeof host);
            }).find("to_device inside queue_as_graph"),
            std::string::npos);
  // Eager again afterwards.
  gpu.to_device(x.get(), host, sizeof host);
  float back[4] = {};
  gpu.to_host(back, x.get(), sizeof back);
  EXPECT_EQ(std::memcmp(back, host, sizeof host), 0);
}

}  // namespace
}  // namespace mpiasr
