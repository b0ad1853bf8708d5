// The CUDA backend: kernels/backend.h on one GPU with fp16 activations and
// weight copies (Act = __half) and fp32 master weights, weight gradients,
// optimizer state and statistics (Acc = float). Every operation is queued on
// one compute stream (stream()); only to_host and synchronize wait for
// it. A training step queues its work without waiting (DESIGN.md "A
// step without host synchronization"): losses, norms and the loss scale stay
// on the device (kernels/step_control.h).
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
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/device_arena.h"
#include "kernels/cuda/pinned_staging.h"

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

class CudaBackend : public Backend<__half, float> {
 public:
  static constexpr size_t kCublasWorkspace = size_t(32) << 20;
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

  void* alloc(size_t bytes) override;
  void release(void* ptr) override;
  void to_device(void* dst, const void* host_src, size_t bytes) override;
  void to_host(void* host_dst, const void* src, size_t bytes) override;
  const float* upload_input(const float* host_src, size_t n) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* ptr, size_t bytes) override;
  void synchronize() override;

  void cast_acc_to_act(__half* dst, const float* src, size_t n) override;
  void cast_act_to_acc(float* dst, const __half* src, size_t n) override;
  void cast_f32_to_act(__half* dst, const float* src, size_t n) override;
  void add_scaled(__half* y, const __half* x, const __half* r, float alpha, size_t n) override;
  void accumulate_scaled(__half* dy, const __half* dx, float alpha, size_t n) override;
  void mask_padding(__half* x, const int32_t* lengths, int B, int T, int C) override;

  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const __half* A, int lda,
            int64_t stride_a, const __half* B, int ldb, int64_t stride_b, float beta, __half* C,
            int ldc, int64_t stride_c, int batch) override;
  void linear_forward(__half* out, const __half* inp, const __half* weight, const __half* bias,
                      int M, int K, int N) override;
  void linear_backward(__half* dinp, float* dweight, float* dbias, const __half* dout,
                       const __half* inp, const __half* weight, int M, int K, int N) override;

  void conv2d_forward(__half* out, const __half* inp, const __half* weight, const __half* bias,
                      int B, int Cin, int H, int W, int Cout) override;
  void conv2d_backward(__half* dinp, float* dweight, float* dbias, const __half* dout,
                       const __half* inp, const __half* weight, int B, int Cin, int H, int W,
                       int Cout) override;

  void layernorm_forward(__half* out, float* mean, float* rstd, const __half* inp,
                         const __half* weight, const __half* bias, int N, int C,
                         float eps) override;
  void layernorm_backward(__half* dinp, float* dweight, float* dbias, const __half* dout,
                          const __half* inp, const __half* weight, const float* mean,
                          const float* rstd, int N, int C) override;

  void relu_forward(__half* out, const __half* inp, size_t n) override;
  void relu_backward(__half* dinp, const __half* dout, const __half* inp, size_t n) override;
  void swish_forward(__half* out, const __half* inp, size_t n) override;
  void swish_backward(__half* dinp, const __half* dout, const __half* inp, size_t n) override;
  void glu_forward(__half* out, const __half* inp, int N, int C) override;
  void glu_backward(__half* dinp, const __half* dout, const __half* inp, int N, int C) override;

  void dropout_forward(__half* out, const __half* inp, float p, uint64_t seed, uint64_t offset,
                       size_t n) override;
  void dropout_backward(__half* dinp, const __half* dout, float p, uint64_t seed, uint64_t offset,
                        size_t n) override;

  void qkv_split_rope_forward(__half* q, __half* k, __half* v, const __half* qkv, int B, int T,
                              int H, int Dh) override;
  void qkv_split_rope_backward(__half* dqkv, const __half* dq, const __half* dk, const __half* dv,
                               int B, int T, int H, int Dh) override;
  void masked_softmax_forward(__half* probs, const __half* scores, const int32_t* lengths, int B,
                              int H, int T) override;
  void masked_softmax_backward(__half* dscores, const __half* dprobs, const __half* probs, int B,
                               int H, int T) override;
  void merge_heads_forward(__half* out, const __half* ctx, int B, int T, int H, int Dh) override;
  void merge_heads_backward(__half* dctx, const __half* dout, int B, int T, int H, int Dh) override;

  void depthwise_conv1d_forward(__half* out, const __half* inp, const __half* weight,
                                const __half* bias, const int32_t* lengths, int B, int T, int C,
                                int K) override;
  void depthwise_conv1d_backward(__half* dinp, float* dweight, float* dbias, const __half* dout,
                                 const __half* inp, const __half* weight, const int32_t* lengths,
                                 int B, int T, int C, int K) override;

  void log_softmax_forward(float* logprobs, const __half* logits, int N, int V) override;
  void ctc_loss(double* losses, __half* dlogits, const float* logprobs, const int32_t* targets,
                const int32_t* target_lengths, const int32_t* input_lengths,
                const double* grad_scale, const float* loss_scale, double* loss_sum, int B, int T,
                int V) override;

  void add_sum_squares(double* sum, const float* g, size_t n) override;
  void decide_step(StepControl* control, const StepRule& rule) override;
  void adamw_step(float* w, __half* w_act, const float* g, float* m, float* v,
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
    kLengths,
    kCtcArguments,
    kCtcWork,
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
  // lengths [B] (host), checked to lie in [0, T], as a device array.
  const int32_t* device_lengths(const int32_t* lengths, int B, int T);
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
  CublasHandle cublas_;
  void* cublas_workspace_ = nullptr;
  std::array<ScratchBuffer, kScratchCount> scratch_{};
  std::vector<int32_t> uploaded_lengths_;  // what the kLengths buffer holds
  int rope_frames_ = 0, rope_head_dim_ = 0;
};

}  // namespace mpiasr
