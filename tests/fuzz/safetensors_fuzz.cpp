// libFuzzer target: the safetensors reader. A file either fails with a
// checkpoint Error or parses into tensors that tile its data; written again
// (serialize_safetensors) and read back, it holds the same tensors and
// metadata, byte for byte.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "io/safetensors.h"
#include "src/base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mpiasr;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  SafetensorsView view;
  try {
    view = parse_safetensors(bytes, "fuzz.safetensors");
  } catch (const Error& error) {
    if (error.code() != ExitCode::kCheckpoint) std::abort();
    return 0;
  }
  std::vector<TensorRef> refs;
  for (const auto& [name, tensor] : view.tensors) {
    if (tensor.bytes.size() != size_t(tensor.numel()) * dtype_size(tensor.dtype)) std::abort();
    if (tensor.dtype == DType::kF32) tensor.to_vector<float>();
    refs.push_back(TensorRef{name, tensor.dtype, tensor.shape, tensor.bytes.data()});
  }
  const std::string again = serialize_safetensors(refs, view.metadata);
  const SafetensorsView reread = parse_safetensors(again, "fuzz.safetensors (written again)");
  if (reread.metadata != view.metadata || reread.tensors.size() != view.tensors.size())
    std::abort();
  for (const auto& [name, tensor] : view.tensors) {
    const TensorView& other = reread.at(name);
    if (other.dtype != tensor.dtype || other.shape != tensor.shape || other.bytes != tensor.bytes) {
      std::abort();
    }
  }
  return 0;
}
