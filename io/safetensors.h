// safetensors: the tensor file format of Hugging Face's `safetensors` package,
// so checkpoints load in Python with `safetensors.numpy.load_file` or
// `safetensors.torch.load_file`.
//
// Layout of a file of S bytes:
//   [0, 8)        N, the header length, u64 little-endian
//   [8, 8+N)      JSON header, padded with spaces so 8+N is a multiple of 8:
//                 {"__metadata__": {"key": "value", ...},
//                  "name": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]},
//                  ...}
//   [8+N, S)      the data: each tensor's elements row-major, little-endian,
//                 at [8+N+begin, 8+N+end); end-begin = prod(shape) * element size.
// The writer packs tensors without gaps in the order of the Python package
// (its Rust core): dtype descending in the order of the DType enum below, then
// name ascending. Element sizes never grow along that order, so every tensor
// starts at a multiple of its element size; for a single dtype it is simply
// sorted by name. The header lists "__metadata__" first, then the tensors in
// data order, as compact JSON.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/error.h"

namespace mpiasr {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

// Element types, in the order of the safetensors Rust enum (the writer's sort
// key); 16-bit floats are carried as raw bytes.
enum class DType { kBool, kU8, kI8, kI16, kF16, kBF16, kI32, kF32, kF64, kI64 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // "F32", "I64", ...
// Throws Error naming `source` and the dtype when it is not one of the above.
DType dtype_from_name(std::string_view name, const std::string& source);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::kF64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::kI32;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::kI64;
}
template <>
constexpr DType dtype_of<int16_t>() {
  return DType::kI16;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::kI8;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::kU8;
}

int64_t shape_numel(std::span<const int64_t> shape);

// A tensor to write: the caller's bytes, borrowed until serialization returns.
struct TensorRef {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // prod(shape) * dtype_size(dtype) bytes

  template <typename T>
  static TensorRef of(std::string name, std::vector<int64_t> shape, const T* data) {
    return TensorRef{std::move(name), dtype_of<T>(), std::move(shape), data};
  }
};

// A tensor read from a file: a view into the caller's buffer of file bytes.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::string_view bytes;

  int64_t numel() const { return shape_numel(shape); }
  // Copies the elements into `out`, which must hold exactly numel() of them;
  // throws Error naming the tensor when the dtype or the count differ.
  template <typename T>
  void copy_to(std::span<T> out) const {
    check_copy(dtype_of<T>(), out.size());
    if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  }
  template <typename T>
  std::vector<T> to_vector() const {
    std::vector<T> out(static_cast<size_t>(numel()));
    copy_to(std::span<T>(out));
    return out;
  }

 private:
  void check_copy(DType wanted, size_t count) const;
};

struct SafetensorsView {
  std::map<std::string, TensorView> tensors;
  std::map<std::string, std::string> metadata;

  // The named tensor; throws Error listing what the file holds when absent.
  const TensorView& at(const std::string& name) const;
};

// The complete file as bytes. Throws Error on duplicate names, a null data
// pointer for a non-empty tensor, negative dimensions, or a name that is empty
// or "__metadata__".
std::string serialize_safetensors(std::span<const TensorRef> tensors,
                                  const std::map<std::string, std::string>& metadata = {});

// Parses and validates a file's bytes (`source` names it in errors): the
// header length against the size, the JSON, every dtype, shape and offset
// pair, and that the tensors tile the data exactly. The views point into
// `bytes`, which must outlive them. Errors have ExitCode::kCheckpoint.
SafetensorsView parse_safetensors(std::string_view bytes, const std::string& source);

}  // namespace mpiasr
