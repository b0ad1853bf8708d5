#include "model/presets.h"

#include "src/base/error.h"

namespace mpiasr {

namespace {

struct NamedPreset {
  const char* name;
  ConformerConfig config;
};

ConformerConfig make_preset(int d_model, int n_layers, int n_heads, int channels) {
  ConformerConfig config;
  config.d_model = d_model;
  config.n_layers = n_layers;
  config.n_heads = n_heads;
  config.subsampling_channels = channels;
  return config;
}

const std::vector<NamedPreset>& presets() {
  static const std::vector<NamedPreset> table = {
      {"tiny", make_preset(32, 2, 2, 32)},
      {"small", make_preset(144, 6, 4, 144)},
      {"medium", make_preset(256, 18, 4, 256)},
      {"large", make_preset(512, 18, 8, 512)},
  };
  return table;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}

}  // namespace

std::vector<std::string> conformer_preset_names() {
  std::vector<std::string> names;
  for (const NamedPreset& preset : presets()) names.push_back(preset.name);
  return names;
}

ConformerConfig conformer_preset(const std::string& name) {
  for (const NamedPreset& preset : presets()) {
    if (name == preset.name) return preset.config;
  }
  MPIASR_FAIL(ExitCode::kUsage,
              "unknown model preset '"
                  << name << "' (valid presets: " << joined(conformer_preset_names()) << ")");
}

void validate_config(const ConformerConfig& c) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) MPIASR_FAIL(ExitCode::kUsage, "model config: " << what);
  };
  require(c.n_mels >= 7, "n_mels = " + std::to_string(c.n_mels) + " must be at least 7");
  require(c.d_model > 0, "d_model = " + std::to_string(c.d_model) + " must be positive");
  require(c.n_layers >= 0, "n_layers = " + std::to_string(c.n_layers) + " must be >= 0");
  require(c.n_heads > 0 && c.d_model % c.n_heads == 0,
          "d_model = " + std::to_string(c.d_model) +
              " must be divisible by n_heads = " + std::to_string(c.n_heads));
  require(c.n_heads > 0 && (c.d_model / c.n_heads) % 2 == 0,
          "head dimension d_model / n_heads = " + std::to_string(c.d_model / c.n_heads) +
              " must be even (rotary embedding)");
  require(c.ff_mult > 0, "ff_mult = " + std::to_string(c.ff_mult) + " must be positive");
  require(c.conv_kernel > 0 && c.conv_kernel % 2 == 1,
          "conv_kernel = " + std::to_string(c.conv_kernel) + " must be odd and positive");
  require(c.subsampling_channels > 0,
          "subsampling_channels = " + std::to_string(c.subsampling_channels) + " must be positive");
  require(c.vocab_size >= 2,
          "vocab_size = " + std::to_string(c.vocab_size) + " must be at least 2 (blank + 1)");
  require(c.dropout >= 0.0f && c.dropout < 1.0f,
          "dropout = " + std::to_string(c.dropout) + " must be in [0, 1)");
  require(c.layernorm_eps > 0.0f,
          "layernorm_eps = " + std::to_string(c.layernorm_eps) + " must be positive");
}

int subsampled_frames(int input_frames) {
  int l1 = input_frames >= 3 ? (input_frames - 1) / 2 : 0;
  return l1 >= 3 ? (l1 - 1) / 2 : 0;
}

int subsampled_bins(int n_mels) {
  return subsampled_frames(n_mels);
}

int64_t count_parameters(const ConformerConfig& c) {
  const int64_t d = c.d_model, f = int64_t(c.ff_mult) * c.d_model, ch = c.subsampling_channels;
  const int64_t layernorm = 2 * d;
  const int64_t subsampling =
      (ch * 9 + ch) + (ch * ch * 9 + ch) + (d * subsampled_bins(c.n_mels) * ch + d);
  const int64_t feed_forward = layernorm + (f * d + f) + (d * f + d);
  const int64_t attention = layernorm + (3 * d * d + 3 * d) + (d * d + d);
  const int64_t conv_module =
      layernorm + (2 * d * d + 2 * d) + (d * c.conv_kernel + d) + layernorm + (d * d + d);
  const int64_t block = 2 * feed_forward + attention + conv_module + layernorm;
  const int64_t head = int64_t(c.vocab_size) * d + c.vocab_size;
  return subsampling + c.n_layers * block + head;
}

double forward_flops(const ConformerConfig& c, int B, int T) {
  const double d = c.d_model, f = double(c.ff_mult) * c.d_model, C = c.subsampling_channels;
  const double T1 = (T - 1) / 2, F1 = (c.n_mels - 1) / 2;
  const double T2 = subsampled_frames(T), F2 = subsampled_bins(c.n_mels);
  const double rows = B * T2, Dh = d / c.n_heads;
  const double conv0 = 2.0 * B * T1 * F1 * C * 9;
  const double conv1 = 2.0 * B * T2 * F2 * C * C * 9;
  const double sub_linear = 2.0 * rows * F2 * C * d;
  const double ffn = 2.0 * (2.0 * rows * d * f * 2);
  const double attention =
      2.0 * rows * d * 3 * d + 2.0 * 2.0 * B * c.n_heads * T2 * T2 * Dh + 2.0 * rows * d * d;
  const double conv_module =
      2.0 * rows * d * 2 * d + 2.0 * rows * d * c.conv_kernel + 2.0 * rows * d * d;
  const double head = 2.0 * rows * d * c.vocab_size;
  return conv0 + conv1 + sub_linear + c.n_layers * (ffn + attention + conv_module) + head;
}

double forward_backward_flops(const ConformerConfig& c, int B, int T) {
  const double conv0 = 2.0 * B * ((T - 1) / 2) * ((c.n_mels - 1) / 2) * c.subsampling_channels * 9;
  return 3.0 * forward_flops(c, B, T) - conv0;
}

}  // namespace mpiasr
