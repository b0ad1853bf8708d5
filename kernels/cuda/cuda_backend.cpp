// CudaBackend: each Backend operation as host-side checks, argument uploads
// and the launch of its kernel family in kernels/cuda/ (see cuda_backend.h).
#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "kernels/ctc_check.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/conv2d.h"
#include "kernels/cuda/ctc_loss.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/depthwise_conv1d.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/log_softmax.h"

namespace mpiasr {

namespace {

// Makes `device` current for this thread (before the stream and arena exist).
int use_device(int device) {
  const CudaDeviceCount devices = cuda_device_count();
  if (devices.count == 0) MPIASR_FAIL(ExitCode::kUsage, "no CUDA device: " << devices.error);
  if (device < 0 || device >= devices.count) {
    MPIASR_FAIL(ExitCode::kUsage,
                "CUDA device " << device << " requested, " << devices.count << " visible");
  }
  CUDA_CHECK(cudaSetDevice(device));
  return device;
}

size_t default_arena_bytes(size_t reserve_bytes) {
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return DeviceArena::capacity_for(free_bytes, reserve_bytes);
}

// The host layout of the CTC arguments: arrays packed at 8-byte aligned offsets.
class ArgumentPack {
 public:
  template <typename T>
  size_t add(const T* values, size_t count) {
    const size_t offset = (bytes_.size() + 7) / 8 * 8;
    bytes_.resize(offset + count * sizeof(T));
    if (count > 0) std::memcpy(bytes_.data() + offset, values, count * sizeof(T));
    return offset;
  }
  const unsigned char* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<unsigned char> bytes_;
};

}  // namespace

CudaBackend::CudaBackend(const CudaBackendOptions& options)
    : device_(use_device(options.device)),
      conv2d_column_budget_(options.conv2d_column_budget),
      info_(cuda_device_info(device_)) {
  arena_ = std::make_unique<DeviceArena>(
      options.arena_bytes > 0 ? options.arena_bytes : default_arena_bytes(options.reserve_bytes));
  // cublasSetStream resets the workspace, so the stream is set first.
  CUBLAS_CHECK(cublasSetStream(cublas_.get(), stream_.get()));
  cublas_workspace_ = arena_->allocate(kCublasWorkspace);
  CUBLAS_CHECK(cublasSetWorkspace(cublas_.get(), cublas_workspace_, kCublasWorkspace));
}

CudaBackend::~CudaBackend() {
  // Queued work may still read arena memory; let it finish before the arena goes.
  (void)cudaStreamSynchronize(copy_stream_.get());
  (void)cudaStreamSynchronize(stream_.get());
}

std::string CudaBackend::name() const {
  std::ostringstream out;
  out << "cuda-fp16 (" << info_.name << ", sm_" << info_.major << info_.minor << ", device "
      << device_ << ", arena " << arena_->capacity() / double(1 << 30) << " GiB)";
  return out.str();
}

void* CudaBackend::scratch(Scratch which, size_t bytes) {
  ScratchBuffer& buffer = scratch_[size_t(which)];
  if (buffer.bytes < bytes) {
    // At least doubling, so shapes that creep up do not regrow every step.
    const size_t grown = std::max(bytes, 2 * buffer.bytes);
    arena_->release(buffer.ptr);
    buffer = ScratchBuffer{};
    buffer.ptr = arena_->allocate(grown);
    buffer.bytes = grown;
    if (which == kLengths) uploaded_lengths_.clear();
    if (which == kRopeTables) rope_frames_ = rope_head_dim_ = 0;
  }
  return buffer.ptr;
}

const int32_t* CudaBackend::device_lengths(const int32_t* lengths, int B, int T) {
  for (int b = 0; b < B; ++b) {
    MPIASR_CHECK(lengths[b] >= 0 && lengths[b] <= T, "length " << lengths[b] << " of utterance "
                                                               << b << " is outside [0, " << T
                                                               << "]");
  }
  int32_t* device = scratch_of<int32_t>(kLengths, size_t(std::max(B, 1)));
  if (uploaded_lengths_.size() != size_t(B) ||
      !std::equal(lengths, lengths + B, uploaded_lengths_.begin())) {
    uploaded_lengths_.assign(lengths, lengths + B);
    staging_.copy_to_device(device, lengths, sizeof(int32_t) * size_t(B), stream_.get());
  }
  return device;
}

void CudaBackend::rope_tables(int T, int Dh, const float** cos_table, const float** sin_table) {
  MPIASR_CHECK(Dh > 0 && Dh % 2 == 0, "rotary embedding needs an even head size, got " << Dh);
  const size_t half = size_t(Dh / 2);
  if (Dh != rope_head_dim_ || T > rope_frames_) {
    const int frames = (std::max(T, 1) + 511) / 512 * 512;
    float* tables = scratch_of<float>(kRopeTables, 2 * size_t(frames) * half);
    cuda_rope_table(tables, tables + size_t(frames) * half, frames, Dh, stream_.get());
    rope_frames_ = frames;
    rope_head_dim_ = Dh;
  }
  const float* tables = static_cast<const float*>(scratch_[kRopeTables].ptr);
  *cos_table = tables;
  *sin_table = tables + size_t(rope_frames_) * half;
}

// ---- memory -----------------------------------------------------------------

void* CudaBackend::alloc(size_t bytes) {
  return arena_->allocate(bytes);
}

void CudaBackend::release(void* ptr) {
  arena_->release(ptr);
}

void CudaBackend::to_device(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  staging_.copy_to_device(dst, host_src, bytes, stream_.get());
}

void CudaBackend::to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_.get()));
  stream_.synchronize();
}

const float* CudaBackend::upload_input(const float* host_src, size_t n) {
  const size_t bytes = std::max<size_t>(n, 1) * sizeof(float);
  // The other slot was handed out last time and its reader is queued now:
  // the copy that reuses it waits for this point of the compute stream.
  input_slots_[size_t(input_slot_)].consumed.record(stream_.get());
  input_slot_ ^= 1;
  InputSlot& slot = input_slots_[size_t(input_slot_)];
  if (slot.pinned.bytes() < bytes) {
    // Growing (at least doubling) happens on the first batches of new
    // shapes; both streams are drained so no queued copy or kernel still
    // uses the memory given back.
    const size_t grown = std::max(bytes, 2 * slot.pinned.bytes());
    copy_stream_.synchronize();
    stream_.synchronize();
    slot.pinned = PinnedBuffer(grown);
    arena_->release(slot.device);
    slot.device = arena_->allocate(grown);
  }
  slot.copied.wait();  // the copy two calls ago read the pinned memory; done by now
  std::memcpy(slot.pinned.data(), host_src, n * sizeof(float));
  slot.consumed.wait_on(copy_stream_.get());
  CUDA_CHECK(cudaMemcpyAsync(slot.device, slot.pinned.data(), n * sizeof(float),
                             cudaMemcpyHostToDevice, copy_stream_.get()));
  slot.copied.record(copy_stream_.get());
  slot.copied.wait_on(stream_.get());
  return static_cast<const float*>(slot.device);
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_.get()));
}

void CudaBackend::zero(void* ptr, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream_.get()));
}

void CudaBackend::synchronize() {
  stream_.synchronize();
}

// ---- casts and elementwise --------------------------------------------------

void CudaBackend::cast_acc_to_act(__half* dst, const float* src, size_t n) {
  cuda_cast(dst, src, n, stream_.get());
}

void CudaBackend::cast_act_to_acc(float* dst, const __half* src, size_t n) {
  cuda_cast(dst, src, n, stream_.get());
}

void CudaBackend::cast_f32_to_act(__half* dst, const float* src, size_t n) {
  cuda_cast(dst, src, n, stream_.get());
}

void CudaBackend::add_scaled(__half* y, const __half* x, const __half* r, float alpha, size_t n) {
  cuda_add_scaled(y, x, r, alpha, n, stream_.get());
}

void CudaBackend::accumulate_scaled(__half* dy, const __half* dx, float alpha, size_t n) {
  cuda_accumulate_scaled(dy, dx, alpha, n, stream_.get());
}

void CudaBackend::mask_padding(__half* x, const int32_t* lengths, int B, int T, int C) {
  cuda_mask_padding(x, device_lengths(lengths, B, T), B, T, C, stream_.get());
}

// ---- GEMM -------------------------------------------------------------------

void CudaBackend::gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                       const __half* A, int lda, int64_t stride_a, const __half* B, int ldb,
                       int64_t stride_b, float beta, __half* C, int ldc, int64_t stride_c,
                       int batch) {
  cuda_gemm(cublas_.get(), trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b,
            beta, C, CUDA_R_16F, ldc, stride_c, batch);
}

void CudaBackend::linear_forward(__half* out, const __half* inp, const __half* weight,
                                 const __half* bias, int M, int K, int N) {
  cuda_linear_forward(cublas_.get(), stream_.get(), out, inp, weight, bias, M, K, N);
}

void CudaBackend::linear_backward(__half* dinp, float* dweight, float* dbias, const __half* dout,
                                  const __half* inp, const __half* weight, int M, int K, int N) {
  float* partials = dbias ? scratch_of<float>(kPartials, size_t(column_chunks(M)) * N) : nullptr;
  cuda_linear_backward(cublas_.get(), stream_.get(), dinp, dweight, dbias, dout, inp, weight, M, K,
                       N, partials);
}

// ---- convolution subsampling ------------------------------------------------

void CudaBackend::conv2d_forward(__half* out, const __half* inp, const __half* weight,
                                 const __half* bias, int B, int Cin, int H, int W, int Cout) {
  const Conv2dScratchSizes sizes = conv2d_scratch_sizes(B, Cin, H, W, Cout, conv2d_column_budget_);
  Conv2dScratch scratch;
  scratch.images_per_chunk = sizes.images_per_chunk;
  scratch.weight_rows = scratch_of<__half>(kConvWeightRows, sizes.weight_rows);
  scratch.columns = scratch_of<__half>(kConvColumns, sizes.columns);
  cuda_conv2d_forward(cublas_.get(), stream_.get(), out, inp, weight, bias, B, Cin, H, W, Cout,
                      scratch);
}

void CudaBackend::conv2d_backward(__half* dinp, float* dweight, float* dbias, const __half* dout,
                                  const __half* inp, const __half* weight, int B, int Cin, int H,
                                  int W, int Cout) {
  const Conv2dScratchSizes sizes = conv2d_scratch_sizes(B, Cin, H, W, Cout, conv2d_column_budget_);
  Conv2dScratch scratch;
  scratch.images_per_chunk = sizes.images_per_chunk;
  scratch.weight_rows = scratch_of<__half>(kConvWeightRows, sizes.weight_rows);
  scratch.columns = scratch_of<__half>(kConvColumns, sizes.columns);
  if (dinp) scratch.dcolumns = scratch_of<__half>(kConvDcolumns, sizes.columns);
  if (dweight) scratch.dweight_rows = scratch_of<float>(kConvDweightRows, sizes.dweight_rows);
  if (dbias) scratch.partials = scratch_of<float>(kPartials, sizes.partials);
  cuda_conv2d_backward(cublas_.get(), stream_.get(), dinp, dweight, dbias, dout, inp, weight, B,
                       Cin, H, W, Cout, scratch);
}

// ---- normalization ----------------------------------------------------------

void CudaBackend::layernorm_forward(__half* out, float* mean, float* rstd, const __half* inp,
                                    const __half* weight, const __half* bias, int N, int C,
                                    float eps) {
  cuda_layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, eps, stream_.get());
}

void CudaBackend::layernorm_backward(__half* dinp, float* dweight, float* dbias, const __half* dout,
                                     const __half* inp, const __half* weight, const float* mean,
                                     const float* rstd, int N, int C) {
  float* partials = scratch_of<float>(kPartials, 2 * size_t(column_chunks(N)) * C);
  cuda_layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, partials,
                          stream_.get());
}

// ---- activations and dropout ------------------------------------------------

void CudaBackend::relu_forward(__half* out, const __half* inp, size_t n) {
  cuda_relu_forward(out, inp, n, stream_.get());
}

void CudaBackend::relu_backward(__half* dinp, const __half* dout, const __half* inp, size_t n) {
  cuda_relu_backward(dinp, dout, inp, n, stream_.get());
}

void CudaBackend::swish_forward(__half* out, const __half* inp, size_t n) {
  cuda_swish_forward(out, inp, n, stream_.get());
}

void CudaBackend::swish_backward(__half* dinp, const __half* dout, const __half* inp, size_t n) {
  cuda_swish_backward(dinp, dout, inp, n, stream_.get());
}

void CudaBackend::glu_forward(__half* out, const __half* inp, int N, int C) {
  cuda_glu_forward(out, inp, N, C, stream_.get());
}

void CudaBackend::glu_backward(__half* dinp, const __half* dout, const __half* inp, int N, int C) {
  cuda_glu_backward(dinp, dout, inp, N, C, stream_.get());
}

void CudaBackend::dropout_forward(__half* out, const __half* inp, float p, uint64_t seed,
                                  uint64_t offset, size_t n) {
  cuda_dropout(out, inp, p, seed, offset, n, stream_.get());
}

void CudaBackend::dropout_backward(__half* dinp, const __half* dout, float p, uint64_t seed,
                                   uint64_t offset, size_t n) {
  // The gradient passes through the same mask with the same scale.
  cuda_dropout(dinp, dout, p, seed, offset, n, stream_.get());
}

// ---- attention pieces -------------------------------------------------------

void CudaBackend::qkv_split_rope_forward(__half* q, __half* k, __half* v, const __half* qkv, int B,
                                         int T, int H, int Dh) {
  const float *cos_table = nullptr, *sin_table = nullptr;
  rope_tables(T, Dh, &cos_table, &sin_table);
  cuda_qkv_split_rope_forward(q, k, v, qkv, cos_table, sin_table, B, T, H, Dh, stream_.get());
}

void CudaBackend::qkv_split_rope_backward(__half* dqkv, const __half* dq, const __half* dk,
                                          const __half* dv, int B, int T, int H, int Dh) {
  const float *cos_table = nullptr, *sin_table = nullptr;
  rope_tables(T, Dh, &cos_table, &sin_table);
  cuda_qkv_split_rope_backward(dqkv, dq, dk, dv, cos_table, sin_table, B, T, H, Dh, stream_.get());
}

void CudaBackend::masked_softmax_forward(__half* probs, const __half* scores,
                                         const int32_t* lengths, int B, int H, int T) {
  cuda_masked_softmax_forward(probs, scores, device_lengths(lengths, B, T), B, H, T, stream_.get());
}

void CudaBackend::masked_softmax_backward(__half* dscores, const __half* dprobs,
                                          const __half* probs, int B, int H, int T) {
  cuda_masked_softmax_backward(dscores, dprobs, probs, B, H, T, stream_.get());
}

void CudaBackend::merge_heads_forward(__half* out, const __half* ctx, int B, int T, int H, int Dh) {
  cuda_merge_heads_forward(out, ctx, B, T, H, Dh, stream_.get());
}

void CudaBackend::merge_heads_backward(__half* dctx, const __half* dout, int B, int T, int H,
                                       int Dh) {
  cuda_merge_heads_backward(dctx, dout, B, T, H, Dh, stream_.get());
}

// ---- depthwise conv1d -------------------------------------------------------

void CudaBackend::depthwise_conv1d_forward(__half* out, const __half* inp, const __half* weight,
                                           const __half* bias, const int32_t* lengths, int B, int T,
                                           int C, int K) {
  cuda_depthwise_conv1d_forward(out, inp, weight, bias, device_lengths(lengths, B, T), B, T, C, K,
                                stream_.get());
}

void CudaBackend::depthwise_conv1d_backward(__half* dinp, float* dweight, float* dbias,
                                            const __half* dout, const __half* inp,
                                            const __half* weight, const int32_t* lengths, int B,
                                            int T, int C, int K) {
  const int32_t* device = device_lengths(lengths, B, T);
  float* partials = scratch_of<float>(kPartials, depthwise_conv1d_partials(B, T, C, K));
  cuda_depthwise_conv1d_backward(dinp, dweight, dbias, dout, inp, weight, device, B, T, C, K,
                                 partials, stream_.get());
}

// ---- output head and loss ---------------------------------------------------

void CudaBackend::log_softmax_forward(float* logprobs, const __half* logits, int N, int V) {
  cuda_log_softmax_forward(logprobs, logits, N, V, stream_.get());
}

void CudaBackend::ctc_loss(double* losses, __half* dlogits, const float* logprobs,
                           const int32_t* targets, const int32_t* target_lengths,
                           const int32_t* input_lengths, const double* grad_scale,
                           const float* loss_scale, double* loss_sum, int B, int T, int V) {
  check_ctc_arguments(targets, target_lengths, input_lengths, B, T, V);
  MPIASR_CHECK(!dlogits || grad_scale, "ctc_loss: dlogits requested without grad_scale");
  if (B == 0) return;
  int64_t offset = 0;
  for (int b = 0; b < B; ++b) offset += target_lengths[b];

  const CtcLayout layout = ctc_layout(target_lengths, input_lengths, B);
  ArgumentPack pack;
  const size_t at_targets = pack.add(targets, size_t(offset));
  const size_t at_target_offsets = pack.add(layout.target_offsets.data(), size_t(B));
  const size_t at_target_lengths = pack.add(target_lengths, size_t(B));
  const size_t at_input_lengths = pack.add(input_lengths, size_t(B));
  const size_t at_grad_scale = grad_scale ? pack.add(grad_scale, size_t(B)) : 0;
  const size_t at_scratch_offsets = pack.add(layout.scratch_offsets.data(), size_t(B));
  unsigned char* arguments = scratch_of<unsigned char>(kCtcArguments, pack.size());
  staging_.copy_to_device(arguments, pack.data(), pack.size(), stream_.get());

  CtcDeviceArgs args;
  args.targets = reinterpret_cast<const int32_t*>(arguments + at_targets);
  args.target_offsets = reinterpret_cast<const int64_t*>(arguments + at_target_offsets);
  args.target_lengths = reinterpret_cast<const int32_t*>(arguments + at_target_lengths);
  args.input_lengths = reinterpret_cast<const int32_t*>(arguments + at_input_lengths);
  args.grad_scale =
      grad_scale ? reinterpret_cast<const double*>(arguments + at_grad_scale) : nullptr;
  args.scratch_offsets = reinterpret_cast<const int64_t*>(arguments + at_scratch_offsets);
  args.loss_scale = loss_scale;
  args.scratch = scratch_of<double>(kCtcWork, std::max<size_t>(layout.scratch_doubles, 1));
  cuda_ctc_loss(losses, dlogits, logprobs, args, B, T, V, layout.max_target_length, loss_sum,
                stream_.get());
}

// ---- optimizer --------------------------------------------------------------

void CudaBackend::add_sum_squares(double* sum, const float* g, size_t n) {
  cuda_add_sum_squares(sum, g, n, scratch_of<double>(kPartials, size_t(kReductionBlocks)),
                       stream_.get());
}

void CudaBackend::decide_step(StepControl* control, const StepRule& rule) {
  cuda_decide_step(control, rule, stream_.get());
}

void CudaBackend::adamw_step(float* w, __half* w_act, const float* g, float* m, float* v,
                             const AdamWSegment* segments, int segment_count, size_t state_elements,
                             const AdamWHyper& hyper, const StepControl* control) {
  cuda_adamw_step(w, w_act, g, m, v, segments, segment_count, state_elements, hyper, control,
                  stream_.get());
}

}  // namespace mpiasr
