// The parameter store: every trainable tensor of the model in flat buffers,
// one buffer per role, each tensor at the same offset in all of them:
//
//   master  Acc  the weights the optimizer updates (fp32 on CUDA)
//   grad    Acc  the gradients backward accumulates into
//   compute Act  the copy the layers read (fp16 on CUDA); aliases master when
//                Act == Acc
//
// (The AdamW moments are the optimizer's, model/optimizer.h: sharded over
// ranks they no longer follow this layout.)
//
// Tensors are registered in forward order under PyTorch-style names
// ("encoder.layers.3.conv.depthwise.weight") with PyTorch's shapes; each
// starts at a multiple of kParameterAlignment elements (the gaps stay zero),
// and the buffers end at a multiple of `size_multiple` elements (the sharded
// optimizer cuts them into whole pieces of world size x kParameterAlignment).
// Initialization is PyTorch's default, seeded: Linear and Conv weights and
// biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)), LayerNorm weight 1 and bias 0.
// Masters (and any other Acc buffer, e.g. the Adam moments) go to and from the
// host as name -> (shape, float data) for checkpoints.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "src/base/error.h"
#include "src/base/rng.h"

namespace mpiasr {

constexpr size_t kParameterAlignment = 64;  // elements

// Weight decay applies to kWeight only (not to biases and norm parameters).
enum class ParameterKind { kWeight, kBias, kNormWeight, kNormBias };

struct ParameterInfo {
  std::string name;
  std::vector<int64_t> shape;
  ParameterKind kind;
  int64_t fan_in;  // Linear/Conv: inputs per output; sets the init bound
  size_t offset;   // elements into every flat buffer
  size_t count;    // elements
};

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
using NamedTensors = std::map<std::string, HostTensor>;

std::string shape_string(const std::vector<int64_t>& shape);

// Value number `index` of the seeded uniform stream in [0, 1) (splitmix64), the
// source of the initial weights.
double init_uniform(uint64_t seed, uint64_t index);

template <typename Act, typename Acc>
class ParameterStore {
 public:
  static constexpr bool kComputeAliasesMaster = std::is_same_v<Act, Acc>;

  explicit ParameterStore(Backend<Act, Acc>& backend, size_t size_multiple = kParameterAlignment)
      : backend_(backend), size_multiple_(size_multiple) {
    MPIASR_CHECK(size_multiple >= 1 && size_multiple % kParameterAlignment == 0,
                 "parameter buffers padded to multiples of " << size_multiple << " elements");
  }
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;
  ~ParameterStore() {
    for (void* buffer : {static_cast<void*>(master_), static_cast<void*>(grad_)}) {
      if (buffer) backend_.release(buffer);
    }
    if (!kComputeAliasesMaster && compute_) backend_.release(compute_);
  }

  // Registers a tensor (before allocate) and returns its index.
  int add(const std::string& name, std::vector<int64_t> shape, ParameterKind kind, int64_t fan_in) {
    MPIASR_CHECK(!allocated(), "parameter '" << name << "' registered after allocation");
    size_t count = 1;
    for (int64_t extent : shape) count *= size_t(extent);
    size_t offset = padded_size_;
    padded_size_ =
        offset + (count + kParameterAlignment - 1) / kParameterAlignment * kParameterAlignment;
    infos_.push_back({name, std::move(shape), kind, fan_in, offset, count});
    return int(infos_.size()) - 1;
  }

  // Allocates the buffers once (zeroed gradients) and initializes the masters
  // and the compute copy from `seed`.
  void allocate(uint64_t seed) {
    MPIASR_CHECK(!allocated(), "parameters allocated twice");
    padded_size_ = (padded_size_ + size_multiple_ - 1) / size_multiple_ * size_multiple_;
    const size_t bytes = std::max<size_t>(padded_size_, 1) * sizeof(Acc);
    master_ = static_cast<Acc*>(backend_.alloc(bytes));
    grad_ = static_cast<Acc*>(backend_.alloc(bytes));
    if constexpr (kComputeAliasesMaster) {
      compute_ = master_;
    } else {
      compute_ = static_cast<Act*>(backend_.alloc(std::max<size_t>(padded_size_, 1) * sizeof(Act)));
    }
    backend_.zero(grad_, bytes);

    std::vector<Acc> host(padded_size_, Acc(0));
    for (size_t p = 0; p < infos_.size(); ++p) {
      const ParameterInfo& info = infos_[p];
      const uint64_t stream = seed ^ (kSplitMix64Gamma * (p + 1));
      for (size_t i = 0; i < info.count; ++i) {
        double value = 0.0;
        switch (info.kind) {
          case ParameterKind::kWeight:
          case ParameterKind::kBias: {
            double bound = 1.0 / std::sqrt(double(info.fan_in));
            value = (2.0 * init_uniform(stream, i) - 1.0) * bound;
            break;
          }
          case ParameterKind::kNormWeight:
            value = 1.0;
            break;
          case ParameterKind::kNormBias:
            value = 0.0;
            break;
        }
        host[info.offset + i] = Acc(value);
      }
    }
    backend_.to_device(master_, host.data(), padded_size_ * sizeof(Acc));
    refresh_compute();
  }

  bool allocated() const { return master_ != nullptr; }
  // Elements of each flat buffer, alignment gaps included (final once allocated).
  size_t size() const { return padded_size_; }
  // Trainable parameters (gaps excluded).
  int64_t num_parameters() const {
    int64_t total = 0;
    for (const ParameterInfo& info : infos_) total += int64_t(info.count);
    return total;
  }
  const std::vector<ParameterInfo>& infos() const { return infos_; }
  const ParameterInfo& info(int index) const { return infos_[size_t(index)]; }
  int index_of(const std::string& name) const {
    for (size_t p = 0; p < infos_.size(); ++p) {
      if (infos_[p].name == name) return int(p);
    }
    MPIASR_FAIL(ExitCode::kFailure, "no parameter named '" << name << "'");
  }
  // The flat range [offset, offset + count) of tensors first .. last - 1 with
  // the alignment gap after them, so the ranges of consecutive groups of
  // tensors tile the buffer.
  std::pair<size_t, size_t> range(int first, int last) const {
    size_t begin = info(first).offset;
    size_t end = size_t(last) < infos_.size() ? info(last).offset : padded_size_;
    return {begin, end - begin};
  }

  Acc* master() { return master_; }
  Acc* grad() { return grad_; }
  Act* compute() { return compute_; }
  const Act* weight(int index) const { return compute_ + info(index).offset; }
  Acc* grad(int index) { return grad_ + info(index).offset; }

  void zero_grad() { backend_.zero(grad_, padded_size_ * sizeof(Acc)); }
  // compute = (Act) master; nothing to do when they alias.
  void refresh_compute() {
    if constexpr (!kComputeAliasesMaster) backend_.cast_acc_to_act(compute_, master_, padded_size_);
  }

  // Checkpoint form of a host copy of a flat buffer of this store [size()]:
  // prefix + name -> tensor.
  NamedTensors tensors_from_flat(const std::vector<Acc>& host, const std::string& prefix) const {
    MPIASR_CHECK(host.size() == padded_size_,
                 "flat buffer of " << host.size() << " elements, the store has " << padded_size_);
    NamedTensors tensors;
    for (const ParameterInfo& info : infos_) {
      HostTensor& tensor = tensors[prefix + info.name];
      tensor.shape = info.shape;
      tensor.data.assign(host.begin() + info.offset, host.begin() + info.offset + info.count);
    }
    return tensors;
  }
  // The flat host buffer [size()] that `tensors` describe (gaps zero); every
  // prefix + name must be present with the same shape (extra entries are an
  // error too), naming `source` on failure.
  std::vector<Acc> flat_from_tensors(const NamedTensors& tensors, const std::string& prefix,
                                     const std::string& source) const {
    std::vector<Acc> host(padded_size_, Acc(0));
    size_t matched = 0;
    for (const ParameterInfo& info : infos_) {
      auto it = tensors.find(prefix + info.name);
      if (it == tensors.end()) {
        MPIASR_FAIL(ExitCode::kCheckpoint,
                    source << ": tensor '" << prefix + info.name << "' is missing");
      }
      if (it->second.shape != info.shape || it->second.data.size() != info.count) {
        MPIASR_FAIL(ExitCode::kCheckpoint,
                    source << ": tensor '" << it->first << "' has shape "
                           << shape_string(it->second.shape) << " with " << it->second.data.size()
                           << " values, the model expects " << shape_string(info.shape));
      }
      for (size_t i = 0; i < info.count; ++i) host[info.offset + i] = Acc(it->second.data[i]);
      ++matched;
    }
    for (const auto& [name, tensor] : tensors) {
      if (name.rfind(prefix, 0) != 0) continue;
      bool known = false;
      for (const ParameterInfo& info : infos_) known = known || prefix + info.name == name;
      if (!known) {
        MPIASR_FAIL(ExitCode::kCheckpoint,
                    source << ": tensor '" << name << "' does not belong to this model");
      }
    }
    MPIASR_CHECK(matched == infos_.size(), "imported " << matched << " tensors");
    return host;
  }

  NamedTensors export_masters() {
    std::vector<Acc> host(padded_size_);
    backend_.to_host(host.data(), master_, padded_size_ * sizeof(Acc));
    return tensors_from_flat(host, "");
  }
  void import_masters(const NamedTensors& tensors, const std::string& source) {
    const std::vector<Acc> host = flat_from_tensors(tensors, "", source);
    backend_.to_device(master_, host.data(), padded_size_ * sizeof(Acc));
    refresh_compute();
  }

  Backend<Act, Acc>& backend() { return backend_; }

 private:
  Backend<Act, Acc>& backend_;
  std::vector<ParameterInfo> infos_;
  size_t size_multiple_;
  size_t padded_size_ = 0;
  Acc* master_ = nullptr;
  Acc* grad_ = nullptr;
  Act* compute_ = nullptr;
};

extern template class ParameterStore<float, float>;
extern template class ParameterStore<double, double>;

}  // namespace mpiasr
