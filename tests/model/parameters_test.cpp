// Presets, parameter counts, the parameter store's names, layout and
// PyTorch-default initialization, and the checkpoint export/import of masters.
#include "model/parameters.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "model/conformer.h"
#include "model/presets.h"

namespace mpiasr {
namespace {

TEST(Presets, NamedPresetsAndErrors) {
  EXPECT_EQ(conformer_preset_names(),
            (std::vector<std::string>{"tiny", "small", "medium", "large"}));
  const ConformerConfig large = conformer_preset("large");
  EXPECT_EQ(large.d_model, 512);
  EXPECT_EQ(large.n_layers, 18);
  EXPECT_EQ(large.n_heads, 8);
  EXPECT_EQ(conformer_preset("medium").d_model, 256);
  try {
    conformer_preset("huge");
    FAIL() << "unknown preset accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(error.what()).find("'huge' (valid presets: tiny, small, medium, large)"),
              std::string::npos)
        << error.what();
  }
}

TEST(Presets, ValidateConfigRejectsWhatCannotBuildAModel) {
  ConformerConfig config = conformer_preset("small");
  config.n_layers = 4;
  config.dropout = 0.25f;
  config.vocab_size = 64;
  EXPECT_NO_THROW(validate_config(config));
  config.n_heads = 5;
  EXPECT_THROW(validate_config(config), Error);
  config = conformer_preset("tiny");
  config.vocab_size = 10;
  config.conv_kernel = 4;
  EXPECT_THROW(validate_config(config), Error);
  config.conv_kernel = 31;
  config.vocab_size = 0;
  EXPECT_THROW(validate_config(config), Error);
}

TEST(Presets, SubsampledLengths) {
  // L1 = (L - 1) / 2, L2 = (L1 - 1) / 2, nothing below 7 frames.
  EXPECT_EQ(subsampled_frames(400), 99);
  EXPECT_EQ(subsampled_frames(100), 24);
  EXPECT_EQ(subsampled_frames(7), 1);
  EXPECT_EQ(subsampled_frames(6), 0);
  EXPECT_EQ(subsampled_frames(0), 0);
  EXPECT_EQ(subsampled_bins(80), 19);
}

TEST(Presets, ParameterCounts) {
  // By hand for tiny (d 32, 2 layers, C 32, V 10): subsampling 320 + 9248 + 19488;
  // per block: FFN 64 + 4224 + 4128 = 8416, attention 64 + 3168 + 1056 = 4288,
  // conv 64 + 2112 + 1024 + 64 + 1056 = 4320, final norm 64; head 330.
  ConformerConfig tiny = conformer_preset("tiny");
  tiny.vocab_size = 10;
  EXPECT_EQ(count_parameters(tiny), 320 + 9248 + 19488 + 2 * (2 * 8416 + 4288 + 4320 + 64) + 330);
  auto millions = [](const char* name) {
    ConformerConfig config = conformer_preset(name);
    config.vocab_size = 256;
    return double(count_parameters(config)) / 1e6;
  };
  EXPECT_GT(millions("small"), 2.0);
  EXPECT_LT(millions("small"), 6.0);
  EXPECT_GT(millions("medium"), 25.0);
  EXPECT_LT(millions("medium"), 35.0);
  EXPECT_GT(millions("large"), 110.0);
  EXPECT_LT(millions("large"), 130.0);
}

class ParameterStoreTest : public ::testing::Test {
 protected:
  ConformerConfig config() {
    ConformerConfig c = conformer_preset("tiny");
    c.vocab_size = 10;
    return c;
  }
  CpuBackend<float> backend_{1};
};

TEST_F(ParameterStoreTest, NamesShapesAndLayoutInForwardOrder) {
  Conformer<float, float> model(backend_, config(), 2, 40, 1);
  ParameterStore<float, float>& params = model.params();
  EXPECT_EQ(params.num_parameters(), count_parameters(config()));
  const std::vector<ParameterInfo>& infos = params.infos();
  EXPECT_EQ(infos.front().name, "encoder.subsampling.conv.0.weight");
  EXPECT_EQ(infos.front().shape, (std::vector<int64_t>{32, 1, 3, 3}));
  EXPECT_EQ(infos.back().name, "ctc_head.bias");
  const std::vector<std::string> expected_order = {
      "encoder.subsampling.conv.2.weight",      "encoder.subsampling.out.weight",
      "encoder.layers.0.ff1.norm.weight",       "encoder.layers.0.ff1.linear1.weight",
      "encoder.layers.0.attn.qkv.weight",       "encoder.layers.0.conv.pointwise1.weight",
      "encoder.layers.0.conv.depthwise.weight", "encoder.layers.0.conv.conv_norm.weight",
      "encoder.layers.0.ff2.linear2.bias",      "encoder.layers.0.norm_out.bias",
      "encoder.layers.1.ff1.norm.weight",       "ctc_head.weight"};
  int previous = 0;
  for (const std::string& name : expected_order) {
    const int index = params.index_of(name);
    EXPECT_GT(index, previous) << name;
    previous = index;
  }
  EXPECT_EQ(params.info(params.index_of("encoder.layers.1.conv.depthwise.weight")).shape,
            (std::vector<int64_t>{32, 1, 31}));
  EXPECT_EQ(params.info(params.index_of("encoder.layers.0.attn.qkv.weight")).shape,
            (std::vector<int64_t>{96, 32}));
  EXPECT_EQ(params.info(params.index_of("encoder.subsampling.out.weight")).shape,
            (std::vector<int64_t>{32, 19 * 32}));
  for (size_t p = 0; p < infos.size(); ++p) {
    EXPECT_EQ(infos[p].offset % kParameterAlignment, 0u);
    if (p > 0) {
      EXPECT_GE(infos[p].offset, infos[p - 1].offset + infos[p - 1].count);
    }
  }
  EXPECT_GE(params.size(), infos.back().offset + infos.back().count);
}

TEST_F(ParameterStoreTest, PyTorchDefaultInitialization) {
  Conformer<float, float> model(backend_, config(), 2, 40, 1);
  ParameterStore<float, float>& params = model.params();
  for (const ParameterInfo& info : params.infos()) {
    const float* w = params.master() + info.offset;
    if (info.kind == ParameterKind::kNormWeight || info.kind == ParameterKind::kNormBias) {
      const float expected = info.kind == ParameterKind::kNormWeight ? 1.0f : 0.0f;
      for (size_t i = 0; i < info.count; ++i) ASSERT_EQ(w[i], expected) << info.name;
      continue;
    }
    // U(-b, b), b = 1 / sqrt(fan_in): bounded, mean 0, variance b^2 / 3.
    const double bound = 1.0 / std::sqrt(double(info.fan_in));
    double sum = 0.0, squares = 0.0;
    for (size_t i = 0; i < info.count; ++i) {
      ASSERT_LE(std::abs(w[i]), bound) << info.name;
      sum += w[i];
      squares += double(w[i]) * w[i];
    }
    if (info.count >= 1000) {
      const double n = double(info.count), variance = bound * bound / 3.0;
      EXPECT_NEAR(sum / n, 0.0, 5.0 * std::sqrt(variance / n)) << info.name;
      EXPECT_NEAR(squares / n, variance, 0.1 * variance) << info.name;
    }
  }
  EXPECT_EQ(params.info(params.index_of("encoder.subsampling.conv.2.weight")).fan_in, 9 * 32);
  EXPECT_EQ(params.info(params.index_of("encoder.layers.0.conv.depthwise.weight")).fan_in, 31);
  EXPECT_EQ(params.info(params.index_of("encoder.layers.0.ff1.linear2.weight")).fan_in, 128);

  // Seeded: the same seed gives the same weights, another seed others.
  Conformer<float, float> same(backend_, config(), 2, 40, 1);
  Conformer<float, float> other(backend_, config(), 2, 40, 2);
  size_t equal = 0, differ = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    equal += same.params().master()[i] == params.master()[i];
    differ += other.params().master()[i] != params.master()[i];
  }
  EXPECT_EQ(equal, params.size());
  EXPECT_GT(differ, params.size() / 2);
}

TEST_F(ParameterStoreTest, MastersExportAndImportByName) {
  Conformer<float, float> model(backend_, config(), 2, 40, 1);
  Conformer<float, float> other(backend_, config(), 2, 40, 2);
  const NamedTensors masters = model.params().export_masters();
  EXPECT_EQ(masters.size(), model.params().infos().size());
  EXPECT_EQ(masters.at("ctc_head.weight").shape, (std::vector<int64_t>{10, 32}));
  other.params().import_masters(masters, "model.safetensors");
  for (size_t i = 0; i < model.params().size(); ++i) {
    ASSERT_EQ(other.params().master()[i], model.params().master()[i]);
  }

  auto expect_rejected = [&](const NamedTensors& tensors, const std::string& message) {
    try {
      other.params().import_masters(tensors, "step-10/model.safetensors");
      FAIL() << "accepted: " << message;
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::kCheckpoint);
      EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
    }
  };
  NamedTensors wrong_shape = masters;
  wrong_shape["ctc_head.weight"].shape = {32, 10};
  expect_rejected(wrong_shape,
                  "step-10/model.safetensors: tensor 'ctc_head.weight' has shape "
                  "[32, 10] with 320 values, the model expects [10, 32]");
  NamedTensors missing = masters;
  missing.erase("encoder.layers.1.norm_out.bias");
  expect_rejected(missing, "tensor 'encoder.layers.1.norm_out.bias' is missing");
  NamedTensors extra = masters;
  extra["encoder.layers.2.norm_out.bias"] = masters.at("encoder.layers.1.norm_out.bias");
  expect_rejected(extra, "tensor 'encoder.layers.2.norm_out.bias' does not belong to this model");
}

}  // namespace
}  // namespace mpiasr
