// The Conformer a config describes: the preset of model.preset with every
// model.* key that is set replacing the preset's value, the input size from
// features.n_mels and the output size from the tokenizer.
#pragma once

#include "model/presets.h"
#include "src/config.h"

namespace mpiasr {

// vocab_size: the tokenizer's outputs, blank included. Throws Error(kUsage)
// naming the field when the result cannot build a model.
ConformerConfig conformer_config(const Config& config, int vocab_size);

// "conformer small: d_model 144, 6 layers, 4 heads, ff x4, conv kernel 31, vocab 29".
std::string describe_model(const Config& config, const ConformerConfig& model);

}  // namespace mpiasr
