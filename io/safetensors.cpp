// safetensors writer and validating reader; the format is described in
// io/safetensors.h. Validation follows the Python package's Rust core: the
// header must fit in the file, parse, and its tensors must tile the data
// bytes exactly, each with end - begin = prod(shape) * element size.
#include "io/safetensors.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <set>

namespace mpiasr {

namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr std::array<DTypeInfo, 10> kDTypes = {{
    {DType::kBool, "BOOL", 1},
    {DType::kU8, "U8", 1},
    {DType::kI8, "I8", 1},
    {DType::kI16, "I16", 2},
    {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},
    {DType::kI32, "I32", 4},
    {DType::kF32, "F32", 4},
    {DType::kF64, "F64", 8},
    {DType::kI64, "I64", 8},
}};

// Largest header the Python package accepts.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::string shape_text(std::span<const int64_t> shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// prod(shape) * element size, or -1 on a negative dimension or overflow.
int64_t tensor_bytes(std::span<const int64_t> shape, size_t element_size) {
  int64_t bytes = static_cast<int64_t>(element_size);
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes)) return -1;
  }
  return bytes;
}

}  // namespace

size_t dtype_size(DType dtype) {
  return kDTypes[static_cast<size_t>(dtype)].size;
}

std::string_view dtype_name(DType dtype) {
  return kDTypes[static_cast<size_t>(dtype)].name;
}

DType dtype_from_name(std::string_view name, const std::string& source) {
  for (const DTypeInfo& info : kDTypes) {
    if (name == info.name) return info.dtype;
  }
  MPIASR_FAIL(ExitCode::kCheckpoint, source << ": unsupported safetensors dtype '" << name << "'");
}

int64_t shape_numel(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void TensorView::check_copy(DType wanted, size_t count) const {
  if (dtype != wanted) {
    MPIASR_FAIL(ExitCode::kCheckpoint, "tensor '" << name << "' has dtype " << dtype_name(dtype)
                                                  << ", expected " << dtype_name(wanted));
  }
  if (static_cast<int64_t>(count) != numel()) {
    MPIASR_FAIL(ExitCode::kCheckpoint, "tensor '" << name << "' of shape " << shape_text(shape)
                                                  << " has " << numel() << " elements, expected "
                                                  << count);
  }
}

const TensorView& SafetensorsView::at(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    std::string held;
    for (const auto& [key, tensor] : tensors) held += (held.empty() ? "" : ", ") + key;
    MPIASR_FAIL(ExitCode::kCheckpoint,
                "no tensor '" << name << "' (the file holds: " << held << ")");
  }
  return it->second;
}

std::string serialize_safetensors(std::span<const TensorRef> tensors,
                                  const std::map<std::string, std::string>& metadata) {
  std::vector<const TensorRef*> order;
  std::set<std::string_view> names;
  for (const TensorRef& t : tensors) {
    MPIASR_CHECK(!t.name.empty() && t.name != "__metadata__",
                 "invalid safetensors tensor name '" << t.name << "'");
    MPIASR_CHECK(names.insert(t.name).second,
                 "duplicate safetensors tensor name '" << t.name << "'");
    int64_t bytes = tensor_bytes(t.shape, dtype_size(t.dtype));
    MPIASR_CHECK(bytes >= 0, "tensor '" << t.name << "' has invalid shape " << shape_text(t.shape));
    MPIASR_CHECK(bytes == 0 || t.data != nullptr, "tensor '" << t.name << "' has no data");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(), [](const TensorRef* a, const TensorRef* b) {
    if (a->dtype != b->dtype) return a->dtype > b->dtype;
    return a->name < b->name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const TensorRef* t : order) {
    int64_t end = offset + tensor_bytes(t->shape, dtype_size(t->dtype));
    header[t->name] = {
        {"dtype", dtype_name(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string json = header.dump();
  json.append((8 - (8 + json.size()) % 8) % 8, ' ');

  std::string file;
  file.reserve(8 + json.size() + static_cast<size_t>(offset));
  uint64_t header_length = json.size();
  file.append(reinterpret_cast<const char*>(&header_length), 8);
  file += json;
  for (const TensorRef* t : order) {
    size_t bytes = static_cast<size_t>(tensor_bytes(t->shape, dtype_size(t->dtype)));
    if (bytes > 0) file.append(static_cast<const char*>(t->data), bytes);
  }
  return file;
}

SafetensorsView parse_safetensors(std::string_view bytes, const std::string& source) {
  if (bytes.size() < 8) {
    MPIASR_FAIL(ExitCode::kCheckpoint, source
                                           << ": " << bytes.size()
                                           << " bytes is too short for a safetensors file "
                                              "(truncated? the 8-byte header length is missing)");
  }
  uint64_t header_length;
  std::memcpy(&header_length, bytes.data(), 8);
  if (header_length > kMaxHeaderBytes) {
    MPIASR_FAIL(ExitCode::kCheckpoint, source << ": header length " << header_length
                                              << " exceeds the limit of " << kMaxHeaderBytes
                                              << " bytes (not a safetensors file?)");
  }
  if (header_length > bytes.size() - 8) {
    MPIASR_FAIL(ExitCode::kCheckpoint, source << ": header length " << header_length
                                              << " runs past the end of the " << bytes.size()
                                              << "-byte file (truncated?)");
  }
  std::string_view header_text = bytes.substr(8, header_length);
  std::string_view data = bytes.substr(8 + header_length);

  nlohmann::json header = nlohmann::json::parse(header_text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    MPIASR_FAIL(ExitCode::kCheckpoint,
                source << ": the " << header_length << "-byte header is not a JSON object");
  }

  SafetensorsView view;
  struct Span {
    int64_t begin, end;
    const std::string* name;
  };
  std::vector<Span> spans;
  for (const auto& item : header.items()) {
    // Named references, not a structured binding: the lambda below captures them.
    const std::string& name = item.key();
    const nlohmann::json& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        MPIASR_FAIL(ExitCode::kCheckpoint, source << ": __metadata__ is not a JSON object");
      }
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          MPIASR_FAIL(ExitCode::kCheckpoint,
                      source << ": __metadata__ value of '" << key << "' is not a string");
        }
        view.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& what) {
      MPIASR_FAIL(ExitCode::kCheckpoint,
                  source << ": tensor '" << name << "': " << what << " in header " << entry.dump());
    };
    if (!entry.is_object()) bad("entry is not a JSON object");
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) bad("missing dtype");
    if (!entry.contains("shape") || !entry["shape"].is_array()) bad("missing shape");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2) {
      bad("data_offsets is not a [begin, end] pair");
    }
    TensorView tensor;
    tensor.name = name;
    tensor.dtype = dtype_from_name(entry["dtype"].get<std::string>(), source);
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_unsigned()) bad("shape has a dimension that is not a non-negative integer");
      tensor.shape.push_back(d.get<int64_t>());
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      bad("data_offsets are not non-negative integers");
    }
    int64_t begin = offsets[0].get<int64_t>(), end = offsets[1].get<int64_t>();
    int64_t expected = tensor_bytes(tensor.shape, dtype_size(tensor.dtype));
    if (expected < 0) bad("shape overflows");
    if (begin > end || end - begin != expected) {
      bad("data_offsets span " + std::to_string(end - begin) + " bytes but the shape needs " +
          std::to_string(expected));
    }
    if (end > static_cast<int64_t>(data.size())) {
      MPIASR_FAIL(ExitCode::kCheckpoint, source << ": tensor '" << name << "' ends at data byte "
                                                << end << " but the file holds only " << data.size()
                                                << " data bytes (truncated?)");
    }
    tensor.bytes = data.substr(static_cast<size_t>(begin), static_cast<size_t>(expected));
    spans.push_back({begin, end, &view.tensors.emplace(name, std::move(tensor)).first->first});
  }

  // The tensors must tile [0, data.size()) without gaps or overlaps.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  int64_t covered = 0;
  for (const Span& span : spans) {
    if (span.begin != covered) {
      MPIASR_FAIL(ExitCode::kCheckpoint, source << ": tensor '" << *span.name
                                                << "' starts at data byte " << span.begin
                                                << " but the previous tensor ends at " << covered
                                                << " (overlapping or gapped data_offsets)");
    }
    covered = span.end;
  }
  if (covered != static_cast<int64_t>(data.size())) {
    MPIASR_FAIL(ExitCode::kCheckpoint, source << ": the tensors cover " << covered
                                              << " data bytes but the file holds " << data.size()
                                              << " (trailing bytes)");
  }
  return view;
}

}  // namespace mpiasr
