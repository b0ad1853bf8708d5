// safetensors writer/reader: round trips of every dtype, a byte-exact file
// checked against the format's specification, an independent reader written
// here from the specification (length, JSON header, offsets, raw bytes), the
// writer's order and alignment, and errors on truncated or malformed files.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

namespace mpiasr {
namespace {

std::string as_bytes(const void* data, size_t size) {
  return std::string(static_cast<const char*>(data), size);
}

// The error message `parse` throws, or "" when it does not throw.
std::string parse_error(std::string_view bytes) {
  try {
    parse_safetensors(bytes, "broken.safetensors");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
    return e.what();
  }
  return "";
}

TEST(Safetensors, KnownBytesOfOneTensor) {
  // What safetensors.numpy.save({"a": np.array([1, 2], np.float32)}) writes:
  // u64 header length, compact JSON padded with spaces to 8 bytes, the data.
  const float a[2] = {1.0f, 2.0f};
  std::vector<TensorRef> tensors = {TensorRef::of("a", {2}, a)};
  std::string json = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_EQ(json.size(), 54u);
  std::string expected = std::string("\x38\0\0\0\0\0\0\0", 8) + json + "  " +
                         std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
  EXPECT_EQ(serialize_safetensors(tensors), expected);
}

TEST(Safetensors, RoundTripEveryDtype) {
  std::vector<float> f32 = {1.5f, -2.25f, 3.0f, 0.0f, -0.0f, 1e-30f};
  std::vector<double> f64 = {3.141592653589793, -1e300, 2.5};
  std::vector<int32_t> i32 = {-7, 0, 2147483647};
  std::vector<int64_t> i64 = {-9000000000000000000ll, 42};
  std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x7bff};  // 1, -2, 65504 as IEEE half
  std::vector<uint8_t> u8 = {0, 255, 7};
  std::vector<TensorRef> tensors = {
      TensorRef::of("encoder.w", {2, 3}, f32.data()),
      TensorRef::of("d", {3}, f64.data()),
      TensorRef::of("ints", {3, 1}, i32.data()),
      TensorRef::of("longs", {2}, i64.data()),
      TensorRef{"half", DType::kF16, {3}, f16.data()},
      TensorRef::of("bytes", {3}, u8.data()),
      TensorRef::of("scalar", {}, &f64[2]),
      TensorRef::of("empty", {0, 4}, f32.data()),
  };
  std::map<std::string, std::string> metadata = {{"format", "pt"}, {"step", "12"}};
  std::string file = serialize_safetensors(tensors, metadata);
  SafetensorsView view = parse_safetensors(file, "round.safetensors");

  EXPECT_EQ(view.metadata, metadata);
  ASSERT_EQ(view.tensors.size(), tensors.size());
  for (const TensorRef& t : tensors) {
    const TensorView& got = view.at(t.name);
    EXPECT_EQ(got.name, t.name);
    EXPECT_EQ(got.dtype, t.dtype) << t.name;
    EXPECT_EQ(got.shape, t.shape) << t.name;
    size_t size = static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
    EXPECT_EQ(got.bytes, as_bytes(t.data, size)) << t.name;
  }
  EXPECT_EQ(view.at("encoder.w").to_vector<float>(), f32);
  EXPECT_EQ(view.at("d").to_vector<double>(), f64);
  EXPECT_EQ(view.at("ints").to_vector<int32_t>(), i32);
  EXPECT_EQ(view.at("longs").to_vector<int64_t>(), i64);
  EXPECT_EQ(view.at("scalar").to_vector<double>(), std::vector<double>{2.5});
  EXPECT_TRUE(view.at("empty").to_vector<float>().empty());
  EXPECT_EQ(view.at("half").numel(), 3);
}

TEST(Safetensors, IndependentReaderSeesSortedAlignedTensors) {
  // Several same-dtype tensors given out of order, plus mixed dtypes.
  std::vector<float> w(7), b(3), a(5);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = -1.0f - static_cast<float>(i);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 100.0f + static_cast<float>(i);
  std::vector<double> d = {1.0, 2.0};
  std::vector<int64_t> l = {5};
  std::vector<uint16_t> h = {1, 2, 3};
  std::vector<TensorRef> tensors = {
      TensorRef::of("layer.w", {7}, w.data()),  TensorRef{"half", DType::kF16, {3}, h.data()},
      TensorRef::of("layer.b", {3}, b.data()),  TensorRef::of("zz.double", {2}, d.data()),
      TensorRef::of("alpha", {5, 1}, a.data()), TensorRef::of("step", {1}, l.data()),
  };
  std::string file = serialize_safetensors(tensors, {{"note", "x"}});

  // The reader of the specification: 8-byte little-endian length N, N bytes of
  // JSON, data offsets relative to byte 8 + N.
  ASSERT_GE(file.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(file[i]);
  ASSERT_LE(8 + n, file.size());
  EXPECT_EQ((8 + n) % 8, 0u) << "the data must start 8-byte aligned";
  std::string header_text = file.substr(8, n);
  EXPECT_EQ(header_text.find_last_not_of(' ') + 1, header_text.find_last_of('}') + 1)
      << "padding is spaces after the JSON";
  EXPECT_TRUE(header_text.starts_with(R"({"__metadata__":{"note":"x"},)"));
  nlohmann::json header = nlohmann::json::parse(header_text);
  std::string data = file.substr(8 + n);

  struct Placed {
    std::string name;
    uint64_t begin, end;
    std::string dtype;
  };
  std::vector<Placed> placed;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    placed.push_back({name, entry["data_offsets"][0], entry["data_offsets"][1], entry["dtype"]});
  }
  std::sort(placed.begin(), placed.end(),
            [](const Placed& x, const Placed& y) { return x.begin < y.begin; });
  // Data order: 8-byte types (I64 before F64), then F32 sorted by name, then F16.
  std::vector<std::string> order;
  for (const Placed& p : placed) order.push_back(p.name);
  EXPECT_EQ(order,
            (std::vector<std::string>{"step", "zz.double", "alpha", "layer.b", "layer.w", "half"}));
  std::map<std::string, size_t> element_size = {{"I64", 8}, {"F64", 8}, {"F32", 4}, {"F16", 2}};
  uint64_t expected_begin = 0;
  for (const Placed& p : placed) {
    EXPECT_EQ(p.begin, expected_begin) << p.name << " leaves a gap";
    EXPECT_EQ(p.begin % element_size.at(p.dtype), 0u) << p.name << " is misaligned";
    expected_begin = p.end;
  }
  EXPECT_EQ(expected_begin, data.size());

  auto bytes_of = [&](const std::string& name) {
    for (const Placed& p : placed) {
      if (p.name == name) return data.substr(p.begin, p.end - p.begin);
    }
    return std::string("missing");
  };
  EXPECT_EQ(bytes_of("layer.w"), as_bytes(w.data(), 7 * 4));
  EXPECT_EQ(bytes_of("layer.b"), as_bytes(b.data(), 3 * 4));
  EXPECT_EQ(bytes_of("alpha"), as_bytes(a.data(), 5 * 4));
  EXPECT_EQ(bytes_of("zz.double"), as_bytes(d.data(), 2 * 8));
  EXPECT_EQ(bytes_of("step"), as_bytes(l.data(), 8));
  EXPECT_EQ(bytes_of("half"), as_bytes(h.data(), 3 * 2));
  EXPECT_EQ(header["alpha"]["shape"], nlohmann::json::array({5, 1}));
}

TEST(Safetensors, TruncatedFileIsAnErrorNamingTheFile) {
  std::vector<float> w(64, 1.0f);
  std::vector<TensorRef> tensors = {TensorRef::of("w", {8, 8}, w.data()),
                                    TensorRef::of("v", {64}, w.data())};
  std::string file = serialize_safetensors(tensors);

  std::string too_short = parse_error(std::string_view(file).substr(0, 5));
  EXPECT_NE(too_short.find("broken.safetensors"), std::string::npos) << too_short;
  EXPECT_NE(too_short.find("too short"), std::string::npos) << too_short;

  std::string in_header = parse_error(std::string_view(file).substr(0, 40));
  EXPECT_NE(in_header.find("broken.safetensors"), std::string::npos) << in_header;
  EXPECT_NE(in_header.find("runs past the end"), std::string::npos) << in_header;

  std::string in_data = parse_error(std::string_view(file).substr(0, file.size() - 3));
  EXPECT_NE(in_data.find("broken.safetensors"), std::string::npos) << in_data;
  EXPECT_NE(in_data.find("tensor 'w'"), std::string::npos) << in_data;
  EXPECT_NE(in_data.find("truncated"), std::string::npos) << in_data;

  EXPECT_EQ(parse_error(file), "");
}

TEST(Safetensors, MalformedHeadersAreErrors) {
  auto with_header = [](std::string json, size_t data_bytes) {
    uint64_t n = json.size();
    return as_bytes(&n, 8) + json + std::string(data_bytes, '\0');
  };
  EXPECT_NE(parse_error(with_header("{not json", 0)).find("not a JSON object"), std::string::npos);
  EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", 4))
                .find("unsupported safetensors dtype 'Q7'"),
            std::string::npos);
  EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4))
                .find("the shape needs 8"),
            std::string::npos);
  EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8))
                .find("trailing bytes"),
            std::string::npos);
  EXPECT_NE(parse_error(with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
                                    8))
                .find("overlapping"),
            std::string::npos);
  EXPECT_NE(
      parse_error(with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4))
          .find("non-negative"),
      std::string::npos);
  uint64_t huge = uint64_t{1} << 40;
  EXPECT_NE(parse_error(as_bytes(&huge, 8) + "{}").find("exceeds the limit"), std::string::npos);
}

TEST(Safetensors, TypedAccessChecksDtypeAndCount) {
  std::vector<float> w = {1, 2, 3};
  std::vector<TensorRef> tensors = {TensorRef::of("w", {3}, w.data())};
  std::string file = serialize_safetensors(tensors);
  SafetensorsView view = parse_safetensors(file, "t.safetensors");
  EXPECT_THROW(view.at("w").to_vector<double>(), Error);
  std::vector<float> small(2);
  EXPECT_THROW(view.at("w").copy_to(std::span<float>(small)), Error);
  try {
    view.at("missing");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the file holds: w"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, WriterRejectsBadInput) {
  float x = 0;
  std::vector<TensorRef> duplicate = {TensorRef::of("x", {1}, &x), TensorRef::of("x", {1}, &x)};
  EXPECT_THROW(serialize_safetensors(duplicate), Error);
  std::vector<TensorRef> reserved = {TensorRef::of("__metadata__", {1}, &x)};
  EXPECT_THROW(serialize_safetensors(reserved), Error);
  std::vector<TensorRef> null_data = {TensorRef{"x", DType::kF32, {1}, nullptr}};
  EXPECT_THROW(serialize_safetensors(null_data), Error);
}

}  // namespace
}  // namespace mpiasr
