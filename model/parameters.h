// The parameter store: every trainable tensor of the model in flat buffers,
// one buffer per role, each tensor at the same offset in all of them:
//
//   master  Acc  the weights the optimizer updates (fp32 on CUDA)
//   grad    Acc  the gradients backward accumulates into
//   adam_m  Acc  AdamW first moment      adam_v  Acc  AdamW second moment
//   compute Act  the copy the layers read (fp16 on CUDA); aliases master when
//                Act == Acc
//
// Tensors are registered in forward order under PyTorch-style names
// ("encoder.layers.3.conv.depthwise.weight") with PyTorch's shapes; each
// starts at a multiple of kParameterAlignment elements (the gaps stay zero).
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

  explicit ParameterStore(Backend<Act, Acc>& backend) : backend_(backend) {}
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;
  ~ParameterStore() {
    for (void* buffer : {static_cast<void*>(master_), static_cast<void*>(grad_),
                         static_cast<void*>(adam_m_), static_cast<void*>(adam_v_)}) {
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

  // Allocates the buffers once (zeroed gradients and moments) and initializes
  // the masters and the compute copy from `seed`.
  void allocate(uint64_t seed) {
    MPIASR_CHECK(!allocated(), "parameters allocated twice");
    const size_t bytes = std::max<size_t>(padded_size_, 1) * sizeof(Acc);
    master_ = static_cast<Acc*>(backend_.alloc(bytes));
    grad_ = static_cast<Acc*>(backend_.alloc(bytes));
    adam_m_ = static_cast<Acc*>(backend_.alloc(bytes));
    adam_v_ = static_cast<Acc*>(backend_.alloc(bytes));
    if constexpr (kComputeAliasesMaster) {
      compute_ = master_;
    } else {
      compute_ = static_cast<Act*>(backend_.alloc(std::max<size_t>(padded_size_, 1) * sizeof(Act)));
    }
    for (Acc* buffer : {grad_, adam_m_, adam_v_}) backend_.zero(buffer, bytes);

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
  // Elements of each flat buffer, alignment gaps included.
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
  Acc* adam_m() { return adam_m_; }
  Acc* adam_v() { return adam_v_; }
  Act* compute() { return compute_; }
  const Act* weight(int index) const { return compute_ + info(index).offset; }
  Acc* grad(int index) { return grad_ + info(index).offset; }

  void zero_grad() { backend_.zero(grad_, padded_size_ * sizeof(Acc)); }
  // compute = (Act) master; nothing to do when they alias.
  void refresh_compute() {
    if constexpr (!kComputeAliasesMaster) backend_.cast_acc_to_act(compute_, master_, padded_size_);
  }

  // Checkpoint form of an Acc buffer of this store: prefix + name -> tensor.
  NamedTensors export_buffer(const Acc* buffer, const std::string& prefix) {
    std::vector<Acc> host(padded_size_);
    backend_.to_host(host.data(), buffer, padded_size_ * sizeof(Acc));
    NamedTensors tensors;
    for (const ParameterInfo& info : infos_) {
      HostTensor& tensor = tensors[prefix + info.name];
      tensor.shape = info.shape;
      tensor.data.assign(host.begin() + info.offset, host.begin() + info.offset + info.count);
    }
    return tensors;
  }
  // Fills an Acc buffer from `tensors`; every prefix + name must be present with
  // the same shape (extra entries are an error too), naming `source` on failure.
  void import_buffer(Acc* buffer, const NamedTensors& tensors, const std::string& prefix,
                     const std::string& source) {
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
    backend_.to_device(buffer, host.data(), padded_size_ * sizeof(Acc));
  }

  NamedTensors export_masters() { return export_buffer(master_, ""); }
  void import_masters(const NamedTensors& tensors, const std::string& source) {
    import_buffer(master_, tensors, "", source);
    refresh_compute();
  }

  Backend<Act, Acc>& backend() { return backend_; }

 private:
  Backend<Act, Acc>& backend_;
  std::vector<ParameterInfo> infos_;
  size_t padded_size_ = 0;
  Acc* master_ = nullptr;
  Acc* grad_ = nullptr;
  Acc* adam_m_ = nullptr;
  Acc* adam_v_ = nullptr;
  Act* compute_ = nullptr;
};

extern template class ParameterStore<float, float>;
extern template class ParameterStore<double, double>;

}  // namespace mpiasr
