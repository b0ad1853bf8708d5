// CudaBackend: each Backend operation as host-side checks, argument uploads
// and the launch of its kernel family in kernels/cuda/ (see cuda_backend.h).
#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <type_traits>
#include <utility>

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
#include "kernels/cuda/step_graph.h"

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

template <typename Act>
CudaBackend<Act>::CudaBackend(const CudaBackendOptions& options)
    : device_(use_device(options.device)),
      conv2d_column_budget_(options.conv2d_column_budget),
      info_(cuda_device_info(device_)) {
  arena_ = std::make_unique<DeviceArena>(
      options.arena_bytes > 0 ? options.arena_bytes : default_arena_bytes(options.reserve_bytes));
  gemm_ = GemmContext{cublas_lt_.get(), arena_->allocate(kGemmWorkspace), kGemmWorkspace,
                      stream_.get(), &gemm_plans_};
}

template <typename Act>
CudaBackend<Act>::~CudaBackend() {
  // Queued work may still read arena memory; let it finish before the arena goes.
  (void)cudaStreamSynchronize(copy_stream_.get());
  (void)cudaStreamSynchronize(stream_.get());
}

template <typename Act>
std::string CudaBackend<Act>::name() const {
  std::ostringstream out;
  out << (std::is_same_v<Act, __half> ? "cuda-fp16" : "cuda-bf16") << " (" << info_.name << ", sm_"
      << info_.major << info_.minor << ", device " << device_ << ", arena "
      << arena_->capacity() / double(1 << 30) << " GiB)";
  return out.str();
}

template <typename Act>
void* CudaBackend<Act>::scratch(Scratch which, size_t bytes) {
  ScratchBuffer& buffer = scratch_[size_t(which)];
  if (buffer.bytes < bytes) {
    // At least doubling, so shapes that creep up do not regrow every step.
    const size_t grown = std::max(bytes, 2 * buffer.bytes);
    arena_->release(buffer.ptr);
    buffer = ScratchBuffer{};
    buffer.ptr = arena_->allocate(grown);
    buffer.bytes = grown;
    ++scratch_generation_;
    if (which == kLengths) uploaded_lengths_.clear();
    if (which == kRopeTables) rope_frames_ = rope_head_dim_ = 0;
  }
  return buffer.ptr;
}

template <typename Act>
const int32_t* CudaBackend<Act>::device_lengths(const int32_t* lengths, int B, int T) {
  for (int b = 0; b < B; ++b) {
    MPIASR_CHECK(lengths[b] >= 0 && lengths[b] <= T, "length " << lengths[b] << " of utterance "
                                                               << b << " is outside [0, " << T
                                                               << "]");
  }
  const size_t bytes = sizeof(int32_t) * size_t(std::max(B, 1));
  if (cuda_detail::graph_pass != GraphPass::kEager) {
    return static_cast<const int32_t*>(upload_arguments(kLengths, lengths, bytes));
  }
  if (uploaded_lengths_.size() != size_t(B) ||
      !std::equal(lengths, lengths + B, uploaded_lengths_.begin())) {
    upload_arguments(kLengths, lengths, bytes);
    uploaded_lengths_.assign(lengths, lengths + B);
  }
  return scratch_of<int32_t>(kLengths, size_t(std::max(B, 1)));
}

template <typename Act>
const void* CudaBackend<Act>::upload_arguments(Scratch eager_buffer, const void* host_src,
                                               size_t bytes) {
  if (cuda_detail::graph_pass == GraphPass::kEager) {
    void* device = scratch(eager_buffer, bytes);
    staging_.copy_to_device(device, host_src, bytes, stream_.get());
    return device;
  }
  const size_t offset = (graph_argument_bytes_ + 15) / 16 * 16;
  graph_argument_bytes_ = offset + bytes;
  if (cuda_detail::graph_pass == GraphPass::kDry) {
    graph_arguments_.resize(graph_argument_bytes_);
    std::memcpy(graph_arguments_.data() + offset, host_src, bytes);
  }
  return static_cast<const char*>(scratch_[kGraphArguments].ptr) + offset;
}

template <typename Act>
const uint64_t* CudaBackend<Act>::device_seed(float p, uint64_t seed) {
  if (p <= 0.0f) return nullptr;
  if (!seed_slot_ || seed != seed_) {
    seed_slot_ = static_cast<const uint64_t*>(upload_arguments(kSeed, &seed, sizeof seed));
    seed_ = seed;
  }
  return seed_slot_;
}

template <typename Act>
void CudaBackend<Act>::rope_tables(int T, int Dh, const float** cos_table,
                                   const float** sin_table) {
  MPIASR_CHECK(Dh > 0 && Dh % 2 == 0, "rotary embedding needs an even head size, got " << Dh);
  const size_t half = size_t(Dh / 2);
  if (Dh != rope_head_dim_ || T > rope_frames_) {
    const int frames = (std::max(T, 1) + 511) / 512 * 512;
    float* tables = scratch_of<float>(kRopeTables, 2 * size_t(frames) * half);
    // Computed once and kept: queued now even in a graph's dry pass.
    const cuda_detail::EagerScope eager;
    cuda_rope_table(tables, tables + size_t(frames) * half, frames, Dh, stream_.get());
    rope_frames_ = frames;
    rope_head_dim_ = Dh;
  }
  const float* tables = static_cast<const float*>(scratch_[kRopeTables].ptr);
  *cos_table = tables;
  *sin_table = tables + size_t(rope_frames_) * half;
}

// ---- memory -----------------------------------------------------------------

template <typename Act>
void* CudaBackend<Act>::alloc(size_t bytes) {
  return arena_->allocate(bytes);
}

template <typename Act>
void CudaBackend<Act>::release(void* ptr) {
  arena_->release(ptr);
}

template <typename Act>
void CudaBackend<Act>::to_device(void* dst, const void* host_src, size_t bytes) {
  check_not_in_graph_pass("to_device");
  if (bytes == 0) return;
  staging_.copy_to_device(dst, host_src, bytes, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::to_host(void* host_dst, const void* src, size_t bytes) {
  check_not_in_graph_pass("to_host");
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_.get()));
  stream_.synchronize();
}

template <typename Act>
const float* CudaBackend<Act>::upload_input(const float* host_src, size_t n) {
  const size_t bytes = std::max<size_t>(n, 1) * sizeof(float);
  if (cuda_detail::graph_pass != GraphPass::kEager) {
    // The graphs read kGraphFeatures: the dry pass uploads as below, and the
    // upload is copied there before the graph runs; the capture only points there.
    if (cuda_detail::graph_pass == GraphPass::kDry) {
      const cuda_detail::EagerScope eager;
      graph_features_source_ = upload_input(host_src, n);
      graph_feature_bytes_ = bytes;
    }
    return static_cast<const float*>(scratch_[kGraphFeatures].ptr);
  }
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

template <typename Act>
void CudaBackend<Act>::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  copy_on_device_async(dst, src, bytes, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::zero(void* ptr, size_t bytes) {
  if (bytes == 0) return;
  zero_async(ptr, bytes, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::synchronize() {
  check_not_in_graph_pass("synchronize");
  stream_.synchronize();
}

// ---- casts and elementwise --------------------------------------------------

template <typename Act>
void CudaBackend<Act>::cast_acc_to_act(Act* dst, const float* src, size_t n) {
  cuda_cast(dst, src, n, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::cast_act_to_acc(float* dst, const Act* src, size_t n) {
  cuda_cast(dst, src, n, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::cast_f32_to_act(Act* dst, const float* src, size_t n) {
  cuda_cast(dst, src, n, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::mask_padding(Act* x, const int32_t* lengths, int B, int T, int C) {
  cuda_mask_padding(x, device_lengths(lengths, B, T), B, T, C, stream_.get());
}

// ---- linear -----------------------------------------------------------------

template <typename Act>
void CudaBackend<Act>::linear_forward(Act* out, const Act* inp, const Act* weight, const Act* bias,
                                      int M, int K, int N) {
  cuda_linear_forward(gemm_, out, inp, weight, bias, M, K, N);
}

template <typename Act>
void CudaBackend<Act>::linear_backward(Act* dinp, float* dweight, float* dbias, const Act* dout,
                                       const Act* inp, const Act* weight, int M, int K, int N) {
  float* partials = dbias ? scratch_of<float>(kPartials, size_t(column_chunks(M)) * N) : nullptr;
  cuda_linear_backward(gemm_, dinp, dweight, dbias, dout, inp, weight, M, K, N, partials);
}

// ---- convolution subsampling ------------------------------------------------

template <typename Act>
void CudaBackend<Act>::conv2d_forward(Act* out, const Act* inp, const Act* weight, const Act* bias,
                                      int B, int Cin, int H, int W, int Cout, bool relu) {
  const Conv2dScratchSizes sizes = conv2d_scratch_sizes(B, Cin, H, W, Cout, conv2d_column_budget_);
  Conv2dScratch<Act> scratch;
  scratch.images_per_chunk = sizes.images_per_chunk;
  scratch.weight_rows = scratch_of<Act>(kConvWeightRows, sizes.weight_rows);
  scratch.columns = scratch_of<Act>(kConvColumns, sizes.columns);
  cuda_conv2d_forward(gemm_, out, inp, weight, bias, B, Cin, H, W, Cout, relu, scratch);
}

template <typename Act>
void CudaBackend<Act>::conv2d_backward(Act* dinp, float* dweight, float* dbias, const Act* dout,
                                       const Act* inp, const Act* weight, int B, int Cin, int H,
                                       int W, int Cout) {
  const Conv2dScratchSizes sizes = conv2d_scratch_sizes(B, Cin, H, W, Cout, conv2d_column_budget_);
  Conv2dScratch<Act> scratch;
  scratch.images_per_chunk = sizes.images_per_chunk;
  scratch.weight_rows = scratch_of<Act>(kConvWeightRows, sizes.weight_rows);
  scratch.columns = scratch_of<Act>(kConvColumns, sizes.columns);
  if (dinp) scratch.dcolumns = scratch_of<Act>(kConvDcolumns, sizes.columns);
  if (dweight) scratch.dweight_rows = scratch_of<float>(kConvDweightRows, sizes.dweight_rows);
  if (dbias) scratch.partials = scratch_of<float>(kPartials, sizes.partials);
  cuda_conv2d_backward(gemm_, dinp, dweight, dbias, dout, inp, weight, B, Cin, H, W, Cout, scratch);
}

// da1 whole in da1_scratch, then the ReLU, then the first layer's gradients.
template <typename Act>
void CudaBackend<Act>::subsampling_first_conv_backward(float* dweight0, float* dbias0,
                                                       const Act* dout2, const Act* a1,
                                                       const Act* x, const Act* weight2, int B,
                                                       int H, int W, int C, Act* da1_scratch) {
  const int H1 = (H - 3) / 2 + 1, W1 = (W - 3) / 2 + 1;
  conv2d_backward(da1_scratch, nullptr, nullptr, dout2, a1, weight2, B, C, H1, W1, C);
  relu_backward(da1_scratch, da1_scratch, a1, size_t(B) * H1 * W1 * C);
  conv2d_backward(nullptr, dweight0, dbias0, da1_scratch, x, nullptr, B, 1, H, W, C);
}

// ---- normalization ----------------------------------------------------------

template <typename Act>
void CudaBackend<Act>::layernorm_forward(Act* out, float* mean, float* rstd, const Act* inp,
                                         const Act* weight, const Act* bias, int N, int C,
                                         float eps) {
  cuda_layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, eps, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::residual_layernorm_forward(Act* x, Act* out, float* mean, float* rstd,
                                                  const Act* base, const Act* branch, float scale,
                                                  float p, uint64_t seed, uint64_t offset,
                                                  const Act* weight, const Act* bias, int N, int C,
                                                  float eps) {
  cuda_residual_layernorm_forward(x, out, mean, rstd, base, branch, scale, p, device_seed(p, seed),
                                  offset, weight, bias, N, C, eps, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::layernorm_swish_forward(Act* normed, Act* out, float* mean, float* rstd,
                                               const Act* inp, const Act* weight, const Act* bias,
                                               int N, int C, float eps) {
  cuda_layernorm_swish_forward(normed, out, mean, rstd, inp, weight, bias, N, C, eps,
                               stream_.get());
}

template <typename Act>
void CudaBackend<Act>::layernorm_backward(Act* dinp, float* dweight, float* dbias, const Act* dout,
                                          const Act* inp, const Act* weight, const float* mean,
                                          const float* rstd, int N, int C, bool accumulate) {
  float* partials = scratch_of<float>(kPartials, 2 * size_t(column_chunks(N)) * C);
  cuda_layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, accumulate,
                          partials, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::layernorm_swish_backward(Act* dinp, float* dweight, float* dbias,
                                                const Act* dout, const Act* inp, const Act* normed,
                                                const Act* weight, const float* mean,
                                                const float* rstd, int N, int C) {
  float* partials = scratch_of<float>(kPartials, 2 * size_t(column_chunks(N)) * C);
  cuda_layernorm_swish_backward(dinp, dweight, dbias, dout, inp, normed, weight, mean, rstd, N, C,
                                partials, stream_.get());
}

// ---- activations and dropout ------------------------------------------------

template <typename Act>
void CudaBackend<Act>::relu_backward(Act* dinp, const Act* dout, const Act* inp, size_t n) {
  cuda_relu_backward(dinp, dout, inp, n, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::swish_dropout_forward(Act* out, const Act* inp, float p, uint64_t seed,
                                             uint64_t offset, size_t n) {
  cuda_swish_dropout_forward(out, inp, p, device_seed(p, seed), offset, n, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::swish_dropout_backward(Act* dinp, const Act* dout, const Act* inp, float p,
                                              uint64_t seed, uint64_t offset, size_t n) {
  cuda_swish_dropout_backward(dinp, dout, inp, p, device_seed(p, seed), offset, n, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::residual_dropout_backward(Act* dbranch, const Act* dx, float scale, float p,
                                                 uint64_t seed, uint64_t offset, size_t n) {
  cuda_residual_dropout_backward(dbranch, dx, scale, p, device_seed(p, seed), offset, n,
                                 stream_.get());
}

// ---- attention --------------------------------------------------------------

template <typename Act>
void CudaBackend<Act>::attention_forward(Act* out, float* lse, const Act* qkv,
                                         const int32_t* lengths, int B, int T, int H, int Dh,
                                         float scale) {
  const float *cos_table = nullptr, *sin_table = nullptr;
  rope_tables(T, Dh, &cos_table, &sin_table);
  cuda_attention_forward(out, lse, qkv, cos_table, sin_table, device_lengths(lengths, B, T), B, T,
                         H, Dh, scale, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::attention_backward(Act* dqkv, const Act* dout, const Act* out,
                                          const float* lse, const Act* qkv, const int32_t* lengths,
                                          int B, int T, int H, int Dh, float scale) {
  const float *cos_table = nullptr, *sin_table = nullptr;
  rope_tables(T, Dh, &cos_table, &sin_table);
  float* row_dot = scratch_of<float>(kAttentionRows, std::max<size_t>(size_t(B) * H * T, 1));
  cuda_attention_backward(dqkv, row_dot, dout, out, lse, qkv, cos_table, sin_table,
                          device_lengths(lengths, B, T), B, T, H, Dh, scale, stream_.get());
}

// ---- GLU + depthwise conv1d --------------------------------------------------

template <typename Act>
void CudaBackend<Act>::glu_depthwise_conv1d_forward(Act* out, const Act* inp, const Act* weight,
                                                    const Act* bias, const int32_t* lengths, int B,
                                                    int T, int C, int K) {
  cuda_glu_depthwise_conv1d_forward(out, inp, weight, bias, device_lengths(lengths, B, T), B, T, C,
                                    K, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::glu_depthwise_conv1d_backward(Act* dinp, float* dweight, float* dbias,
                                                     const Act* dout, const Act* inp,
                                                     const Act* weight, const int32_t* lengths,
                                                     int B, int T, int C, int K) {
  const int32_t* device = device_lengths(lengths, B, T);
  float* partials = scratch_of<float>(kPartials, glu_depthwise_conv1d_partials(B, T, C, K));
  cuda_glu_depthwise_conv1d_backward(dinp, dweight, dbias, dout, inp, weight, device, B, T, C, K,
                                     partials, stream_.get());
}

// ---- output head and loss ---------------------------------------------------

template <typename Act>
void CudaBackend<Act>::log_softmax_forward(float* logprobs, const Act* logits, int N, int V) {
  cuda_log_softmax_forward(logprobs, logits, N, V, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::ctc_loss(double* losses, Act* dlogits, const float* logprobs,
                                const int32_t* targets, const int32_t* target_lengths,
                                const int32_t* input_lengths, const double* grad_scale,
                                const float* loss_scale, double* loss_sum, int B, int T, int V) {
  check_ctc_arguments(targets, target_lengths, input_lengths, B, T, V);
  MPIASR_CHECK(!dlogits || grad_scale, "ctc_loss: dlogits requested without grad_scale");
  if (B == 0) return;
  const CtcLayout layout = ctc_layout(target_lengths, input_lengths, B);
  std::vector<int32_t> padded_targets(size_t(B) * size_t(layout.target_stride), 0);
  const int32_t* target = targets;
  for (int b = 0; b < B; ++b) {
    std::copy(target, target + target_lengths[b],
              padded_targets.begin() + layout.target_offsets[size_t(b)]);
    target += target_lengths[b];
  }
  ArgumentPack pack;
  const size_t at_targets = pack.add(padded_targets.data(), padded_targets.size());
  const size_t at_target_offsets = pack.add(layout.target_offsets.data(), size_t(B));
  const size_t at_target_lengths = pack.add(target_lengths, size_t(B));
  const size_t at_input_lengths = pack.add(input_lengths, size_t(B));
  const size_t at_grad_scale = grad_scale ? pack.add(grad_scale, size_t(B)) : 0;
  const size_t at_scratch_offsets = pack.add(layout.scratch_offsets.data(), size_t(B));
  const auto* arguments =
      static_cast<const unsigned char*>(upload_arguments(kCtcArguments, pack.data(), pack.size()));

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

template <typename Act>
void CudaBackend<Act>::add_sum_squares(double* sum, const float* g, size_t n) {
  cuda_add_sum_squares(sum, g, n, scratch_of<double>(kPartials, size_t(kReductionBlocks)),
                       stream_.get());
}

template <typename Act>
void CudaBackend<Act>::decide_step(StepControl* control, const StepRule& rule) {
  cuda_decide_step(control, rule, stream_.get());
}

template <typename Act>
void CudaBackend<Act>::adamw_step(float* w, Act* w_act, const float* g, float* m, float* v,
                                  const AdamWSegment* segments, int segment_count,
                                  size_t state_elements, const AdamWHyper& hyper,
                                  const StepControl* control) {
  cuda_adamw_step(w, w_act, g, m, v, segments, segment_count, state_elements, hyper, control,
                  stream_.get());
}

// ---- step graphs --------------------------------------------------------------

template <typename Act>
void CudaBackend<Act>::check_not_in_graph_pass(const char* what) const {
  MPIASR_CHECK(cuda_detail::graph_pass == GraphPass::kEager,
               what << " inside queue_as_graph: a step graph cannot take it");
}

template <typename Act>
uint64_t CudaBackend<Act>::run_graph_pass(GraphPass pass, const std::function<void()>& queue) {
  struct PassScope {
    explicit PassScope(GraphPass pass) {
      cuda_detail::graph_pass = pass;
      cuda_detail::graph_signature = 0;
    }
    ~PassScope() { cuda_detail::graph_pass = GraphPass::kEager; }
  };
  graph_argument_bytes_ = 0;
  if (pass == GraphPass::kDry) {
    graph_arguments_.clear();
    graph_features_source_ = nullptr;
    graph_feature_bytes_ = 0;
  }
  seed_slot_ = nullptr;
  {
    PassScope scope(pass);
    queue();
  }
  seed_slot_ = nullptr;
  return cuda_detail::graph_signature;
}

template <typename Act>
void CudaBackend<Act>::queue_as_graph(const std::function<void()>& queue) {
  check_not_in_graph_pass("queue_as_graph");
  // The dry pass; again if the graphs' input buffers had to grow for it (the
  // signature holds their addresses).
  uint64_t signature = run_graph_pass(GraphPass::kDry, queue);
  if (scratch_[kGraphArguments].bytes < graph_argument_bytes_ ||
      scratch_[kGraphFeatures].bytes < graph_feature_bytes_) {
    scratch(kGraphArguments, std::max<size_t>(graph_argument_bytes_, 1));
    scratch(kGraphFeatures, std::max<size_t>(graph_feature_bytes_, 1));
    signature = run_graph_pass(GraphPass::kDry, queue);
  }
  if (scratch_generation_ != graphs_generation_) {
    // Scratch memory moved: graphs that still run may read the old buffers,
    // which the stream order keeps safe, but none may be launched again.
    if (!step_graphs_.empty()) stream_.synchronize();
    step_graphs_.clear();
    graphs_generation_ = scratch_generation_;
  }

  // The inputs: the packed arguments in one copy, the features from where
  // the dry pass uploaded them.
  if (graph_argument_bytes_ > 0) {
    staging_.copy_to_device(scratch_[kGraphArguments].ptr, graph_arguments_.data(),
                            graph_argument_bytes_, stream_.get());
  }
  if (graph_features_source_) {
    copy_on_device_async(scratch_[kGraphFeatures].ptr, graph_features_source_, graph_feature_bytes_,
                         stream_.get());
  }

  auto found = step_graphs_.find(signature);
  if (found == step_graphs_.end()) {
    if (step_graphs_.size() >= kMaxStepGraphs) {
      const auto oldest =
          std::min_element(step_graphs_.begin(), step_graphs_.end(),
                           [](auto& a, auto& b) { return a.second.last_use < b.second.last_use; });
      step_graphs_.erase(oldest);
    }
    CUDA_CHECK(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal));
    uint64_t captured = 0;
    try {
      captured = run_graph_pass(GraphPass::kCapture, queue);
    } catch (...) {
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(stream_.get(), &partial);
      if (partial) (void)cudaGraphDestroy(partial);
      throw;
    }
    CudaGraphExec exec = CudaGraphExec::end_capture(stream_.get());
    MPIASR_CHECK(captured == signature,
                 "step graph: the capture queued other work than the dry pass before it "
                 "(signatures "
                     << std::hex << captured << " and " << signature
                     << "): the queued code depends on something besides its host arguments");
    found = step_graphs_.emplace(signature, StepGraph{std::move(exec), 0}).first;
    ++graph_counts_.captures;
  } else {
    ++graph_counts_.replays;
  }
  found->second.last_use = ++graph_uses_;
  found->second.exec.launch(stream_.get());
}

template class CudaBackend<__half>;
template class CudaBackend<__nv_bfloat16>;

}  // namespace mpiasr
