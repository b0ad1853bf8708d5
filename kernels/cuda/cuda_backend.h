// The CUDA backend: kernels/backend.h on one GPU with 16-bit activations and
// weight copies (Act = __half for fp16-mixed, __nv_bfloat16 for bf16-mixed)
// and fp32 master weights, weight gradients, optimizer state and statistics
// (Acc = float). Every operation is queued on one compute stream (stream());
// only to_host and synchronize wait for it. A training step queues its work
// without waiting (DESIGN.md "A step without host synchronization"): losses,
// norms and the loss scale stay on the device (kernels/step_control.h).
//
// Memory: all device memory comes from one DeviceArena reserved at
// construction (default: the device's free memory less reserve_bytes, which
// stay free for the CUDA context, NCCL's buffers and cuBLAS). alloc() carves
// it; the backend's own scratch (bias-gradient partials, im2col matrices, RoPE
// tables, uploaded lengths and CTC arguments, the cuBLAS workspace) are arena
// buffers that grow on the first batches of a new shape and are reused after,
// so a step never calls cudaMalloc.
//
// Host arguments (lengths, targets, grad scales, to_device's data) go through
// a ring of pinned memory (PinnedStaging) on the compute stream, so the host
// does not wait for a copy; lengths are uploaded only when they change, so
// the blocks of one step share one upload. The input features (upload_input)
// are double-buffered: pinned memory and device memory per slot, the copy
// queued on a copy stream of its own after the compute work that last read
// the slot, and the compute stream waiting for the copy's event, so the next
// batch's copy overlaps this batch's work. Kernels and their math:
// kernels/cuda/*.cu.
//
// Step graphs (queue_as_graph): a dry pass signs the work without queueing
// it and packs its host arguments; the arguments go to the device in one
// copy, and the graph with that signature is launched, captured first if
// there is none (DESIGN.md "Step graphs").
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/device_arena.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/pinned_staging.h"
#include "kernels/cuda/step_graph.h"

namespace mpiasr {

struct CudaBackendOptions {
  int device = 0;
  size_t arena_bytes = 0;  // 0: the device's free memory less reserve_bytes
  // Left free beside the arena (training.gpu_reserve_mb).
  size_t reserve_bytes = size_t(3) << 30;
  // Elements of the im2col matrix of one Conv2d chunk: memory against fewer,
  // larger GEMMs (kernels/cuda/conv2d.h).
  size_t conv2d_column_budget = size_t(1) << 26;
};

template <typename Act>
class CudaBackend : public Backend<Act, float> {
 public:
  static constexpr size_t kGemmWorkspace = size_t(32) << 20;
  // The pinned ring of host arguments: many steps' worth of lengths and CTC
  // arguments, so the host waits only when it is that far ahead.
  static constexpr size_t kStagingBytes = size_t(16) << 20;

  explicit CudaBackend(const CudaBackendOptions& options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  int device() const { return device_; }
  const CudaDeviceInfo& device_info() const { return info_; }
  cudaStream_t stream() const { return stream_.get(); }
  const DeviceArena& arena() const { return *arena_; }

  std::string name() const override;

  void queue_as_graph(const std::function<void()>& queue) override;
  StepGraphCounts step_graph_counts() const override { return graph_counts_; }

  void* alloc(size_t bytes) override;
  void release(void* ptr) override;
  void to_device(void* dst, const void* host_src, size_t bytes) override;
  void to_host(void* host_dst, const void* src, size_t bytes) override;
  const float* upload_input(const float* host_src, size_t n) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* ptr, size_t bytes) override;
  void synchronize() override;

  void cast_acc_to_act(Act* dst, const float* src, size_t n) override;
  void cast_act_to_acc(float* dst, const Act* src, size_t n) override;
  void cast_f32_to_act(Act* dst, const float* src, size_t n) override;
  void mask_padding(Act* x, const int32_t* lengths, int B, int T, int C) override;

  void linear_forward(Act* out, const Act* inp, const Act* weight, const Act* bias, int M, int K,
                      int N) override;
  void linear_backward(Act* dinp, float* dweight, float* dbias, const Act* dout, const Act* inp,
                       const Act* weight, int M, int K, int N) override;

  void conv2d_forward(Act* out, const Act* inp, const Act* weight, const Act* bias, int B, int Cin,
                      int H, int W, int Cout, bool relu) override;
  void conv2d_backward(Act* dinp, float* dweight, float* dbias, const Act* dout, const Act* inp,
                       const Act* weight, int B, int Cin, int H, int W, int Cout) override;
  void subsampling_first_conv_backward(float* dweight0, float* dbias0, const Act* dout2,
                                       const Act* a1, const Act* x, const Act* weight2, int B,
                                       int H, int W, int C, Act* da1_scratch) override;
  bool subsampling_da1_scratch() const override { return true; }

  void layernorm_forward(Act* out, float* mean, float* rstd, const Act* inp, const Act* weight,
                         const Act* bias, int N, int C, float eps) override;
  void residual_layernorm_forward(Act* x, Act* out, float* mean, float* rstd, const Act* base,
                                  const Act* branch, float scale, float p, uint64_t seed,
                                  uint64_t offset, const Act* weight, const Act* bias, int N, int C,
                                  float eps) override;
  void layernorm_swish_forward(Act* normed, Act* out, float* mean, float* rstd, const Act* inp,
                               const Act* weight, const Act* bias, int N, int C,
                               float eps) override;
  void layernorm_backward(Act* dinp, float* dweight, float* dbias, const Act* dout, const Act* inp,
                          const Act* weight, const float* mean, const float* rstd, int N, int C,
                          bool accumulate) override;
  void layernorm_swish_backward(Act* dinp, float* dweight, float* dbias, const Act* dout,
                                const Act* inp, const Act* normed, const Act* weight,
                                const float* mean, const float* rstd, int N, int C) override;

  void relu_backward(Act* dinp, const Act* dout, const Act* inp, size_t n) override;
  void swish_dropout_forward(Act* out, const Act* inp, float p, uint64_t seed, uint64_t offset,
                             size_t n) override;
  void swish_dropout_backward(Act* dinp, const Act* dout, const Act* inp, float p, uint64_t seed,
                              uint64_t offset, size_t n) override;

  void residual_dropout_backward(Act* dbranch, const Act* dx, float scale, float p, uint64_t seed,
                                 uint64_t offset, size_t n) override;

  void attention_forward(Act* out, float* lse, const Act* qkv, const int32_t* lengths, int B, int T,
                         int H, int Dh, float scale) override;
  void attention_backward(Act* dqkv, const Act* dout, const Act* out, const float* lse,
                          const Act* qkv, const int32_t* lengths, int B, int T, int H, int Dh,
                          float scale) override;

  void glu_depthwise_conv1d_forward(Act* out, const Act* inp, const Act* weight, const Act* bias,
                                    const int32_t* lengths, int B, int T, int C, int K) override;
  void glu_depthwise_conv1d_backward(Act* dinp, float* dweight, float* dbias, const Act* dout,
                                     const Act* inp, const Act* weight, const int32_t* lengths,
                                     int B, int T, int C, int K) override;

  void log_softmax_forward(float* logprobs, const Act* logits, int N, int V) override;
  void ctc_loss(double* losses, Act* dlogits, const float* logprobs, const int32_t* targets,
                const int32_t* target_lengths, const int32_t* input_lengths,
                const double* grad_scale, const float* loss_scale, double* loss_sum, int B, int T,
                int V) override;

  void add_sum_squares(double* sum, const float* g, size_t n) override;
  void decide_step(StepControl* control, const StepRule& rule) override;
  void adamw_step(float* w, Act* w_act, const float* g, float* m, float* v,
                  const AdamWSegment* segments, int segment_count, size_t state_elements,
                  const AdamWHyper& hyper, const StepControl* control) override;

 private:
  // The backend's own device buffers, one per purpose, grown on demand.
  enum Scratch : int {
    kPartials,
    kConvWeightRows,
    kConvColumns,
    kConvDcolumns,
    kConvDweightRows,
    kRopeTables,
    kAttentionRows,
    kLengths,
    kCtcArguments,
    kCtcWork,
    kSeed,
    kGraphArguments,  // the host arguments that the step graphs read
    kGraphFeatures,   // the input features that the step graphs read
    kScratchCount
  };
  struct ScratchBuffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  // A buffer of at least `bytes` for `which`; its previous contents are lost
  // when it grows. Only work on the compute stream may use it: a buffer given
  // back to the arena may be handed out again while queued kernels still read
  // it, which is safe only because every user is ordered on that one stream.
  void* scratch(Scratch which, size_t bytes);
  template <typename T>
  T* scratch_of(Scratch which, size_t count) {
    return static_cast<T*>(scratch(which, count * sizeof(T)));
  }
  // Host data for the work queued next, where it goes: eagerly, copied into
  // `eager_buffer` through the pinned ring; in a graph pass, packed at the
  // pass's next offset of kGraphArguments (copied there in one piece before
  // the graph runs; see queue_as_graph).
  const void* upload_arguments(Scratch eager_buffer, const void* host_src, size_t bytes);
  // lengths [B] (host), checked to lie in [0, T], as a device array.
  const int32_t* device_lengths(const int32_t* lengths, int B, int T);
  // The dropout seed in device memory (the kernels read it there); null
  // when p is 0 (no dropout, no seed read).
  const uint64_t* device_seed(float p, uint64_t seed);
  // Runs queue() in `pass` (kernels/cuda/step_graph.h); returns its signature.
  uint64_t run_graph_pass(GraphPass pass, const std::function<void()>& queue);
  void check_not_in_graph_pass(const char* what) const;
  // cos and sin tables [T, Dh / 2] for RoPE.
  void rope_tables(int T, int Dh, const float** cos_table, const float** sin_table);

  // One of upload_input's two buffers.
  struct InputSlot {
    void* device = nullptr;  // arena memory
    PinnedBuffer pinned;
    CudaEvent copied;    // on the copy stream, after the copy into `device`
    CudaEvent consumed;  // on the compute stream, after the work that read it
  };

  int device_;
  size_t conv2d_column_budget_;
  CudaDeviceInfo info_;
  CudaStream stream_;
  CudaStream copy_stream_;
  std::unique_ptr<DeviceArena> arena_;
  PinnedStaging staging_{kStagingBytes};
  std::array<InputSlot, 2> input_slots_;
  int input_slot_ = 0;  // the slot upload_input handed out last
  CublasLtHandle cublas_lt_;
  GemmPlans gemm_plans_;
  GemmContext gemm_;  // cublas_lt_, its workspace in the arena, stream_, gemm_plans_
  std::array<ScratchBuffer, kScratchCount> scratch_{};
  std::vector<int32_t> uploaded_lengths_;  // what the kLengths buffer holds
  int rope_frames_ = 0, rope_head_dim_ = 0;
  const uint64_t* seed_slot_ = nullptr;  // device_seed's last, for seed_ (this pass)
  uint64_t seed_ = 0;

  // Step graphs, by the signature of the work they queue; at most
  // kMaxStepGraphs, the least recently used dropped first. A scratch buffer
  // that grows (scratch_generation_) drops them all: they hold its pointers.
  static constexpr size_t kMaxStepGraphs = 32;
  struct StepGraph {
    CudaGraphExec exec;
    uint64_t last_use = 0;
  };
  std::unordered_map<uint64_t, StepGraph> step_graphs_;
  uint64_t graph_uses_ = 0;
  uint64_t scratch_generation_ = 0, graphs_generation_ = 0;
  StepGraphCounts graph_counts_;
  // The current graph pass's host arguments, packed as in kGraphArguments (a
  // dry pass fills the bytes; the capture only counts them), and the input
  // features the dry pass uploaded, for kGraphFeatures.
  std::vector<unsigned char> graph_arguments_;
  size_t graph_argument_bytes_ = 0;
  const void* graph_features_source_ = nullptr;
  size_t graph_feature_bytes_ = 0;
};

extern template class CudaBackend<__half>;
extern template class CudaBackend<__nv_bfloat16>;

}  // namespace mpiasr
