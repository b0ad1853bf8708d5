// The Conformer a config describes; see model_config.h.
#include "src/model_config.h"

#include <sstream>

namespace mpiasr {

ConformerConfig conformer_config(const Config& config, int vocab_size) {
  const ModelConfig& m = config.model;
  ConformerConfig model = conformer_preset(std::string(to_string(m.preset)));
  if (m.d_model) model.d_model = *m.d_model;
  if (m.n_layers) model.n_layers = *m.n_layers;
  if (m.n_heads) model.n_heads = *m.n_heads;
  if (m.ff_mult) model.ff_mult = *m.ff_mult;
  if (m.conv_kernel) model.conv_kernel = *m.conv_kernel;
  if (m.subsampling_channels) model.subsampling_channels = *m.subsampling_channels;
  if (m.dropout) model.dropout = float(*m.dropout);
  model.n_mels = config.features.n_mels;
  model.vocab_size = vocab_size;
  validate_config(model);
  return model;
}

std::string describe_model(const Config& config, const ConformerConfig& model) {
  std::ostringstream out;
  out << "conformer " << to_string(config.model.preset) << ": d_model " << model.d_model << ", "
      << model.n_layers << " layers, " << model.n_heads << " heads, ff x" << model.ff_mult
      << ", conv kernel " << model.conv_kernel << ", dropout " << model.dropout << ", vocab "
      << model.vocab_size;
  return out.str();
}

}  // namespace mpiasr
