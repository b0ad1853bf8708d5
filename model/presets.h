// The Conformer-CTC configuration, its named presets, its parameter count and
// its FLOP count.
//
//   tiny    d 32,  2 layers, 2 heads, 32 subsampling channels    (tests)
//   small   d 144, 6 layers, 4 heads, 144 subsampling channels   (CPU demo, ~3.5 M)
//   medium  d 256, 18 layers, 4 heads, 256 subsampling channels  (~30 M)
//   large   d 512, 18 layers, 8 heads, 512 subsampling channels  (~120 M)
//
// A config file or the command line overrides a preset's fields (the model
// section, src/model_config.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mpiasr {

struct ConformerConfig {
  int n_mels = 80;
  int d_model = 0;
  int n_layers = 0;
  int n_heads = 0;
  int ff_mult = 4;
  int conv_kernel = 31;
  int subsampling_channels = 0;
  int vocab_size = 0;  // includes the blank (id 0); set from the tokenizer
  float dropout = 0.1f;
  float layernorm_eps = 1e-5f;
};

// The preset called `name`; throws Error (kUsage) naming the valid presets.
ConformerConfig conformer_preset(const std::string& name);
std::vector<std::string> conformer_preset_names();

// Throws Error (kUsage) naming the first field that cannot build a model
// (d_model not divisible by n_heads, odd head dimension, even kernel, ...).
void validate_config(const ConformerConfig& config);

// Frames after the ×4 subsampling: two 3x3 stride-2 convolutions without
// padding, L1 = (L - 1) / 2, L2 = (L1 - 1) / 2 (0 when L < 7).
int subsampled_frames(int input_frames);
// Feature bins after the subsampling (n_mels 80 -> 19).
int subsampled_bins(int n_mels);

// Number of trainable parameters of the model the config describes.
int64_t count_parameters(const ConformerConfig& config);

// Floating-point operations (2 per multiply-add) of every matrix product and
// convolution of one forward pass on B utterances of T frames; elementwise
// work is not counted. For the benchmarks' GFLOP/s.
double forward_flops(const ConformerConfig& config, int B, int T);
// Forward + backward: backward computes two products per forward product (the
// input gradient and the weight gradient), except the first convolution,
// whose input gradient is not needed.
double forward_backward_flops(const ConformerConfig& config, int B, int T);

}  // namespace mpiasr
