// The feature pipeline of a run; see feature_pipeline.h.
#include "src/feature_pipeline.h"

namespace mpiasr {

FbankOptions fbank_options(const FeaturesConfig& features, FeatureUse use) {
  FbankOptions options = features.kaldi ? FbankOptions::kaldi() : FbankOptions{};
  options.sample_rate = features.sample_rate;
  options.n_mels = features.n_mels;
  if (!features.kaldi) {
    options.window = std::string(to_string(features.window));
    options.preemphasis = features.preemphasis;
  }
  options.dither = use == FeatureUse::kTraining ? features.dither : 0.0;
  return options;
}

FeaturePipeline::FeaturePipeline(const Config& config, FeatureUse use, const std::string& cmvn_path)
    : fbank(fbank_options(config.features, use)) {
  if (config.features.cmvn == CmvnMode::kGlobal) {
    cmvn = Cmvn::from_stats(CmvnStats::load(cmvn_path));
  }
  loader.workers = config.batching.workers;
  loader.queue_depth = config.batching.queue_depth;
  loader.per_utterance_cmvn = config.features.cmvn == CmvnMode::kUtterance;
  loader.seed = config.training.seed;
  if (use == FeatureUse::kTraining) loader.frame_multiple = config.batching.frame_multiple;
  if (use == FeatureUse::kTraining && config.data.speed_perturb) {
    loader.speed_factors = config.data.speed_factors;
  }
  loader.spec_augment = use == FeatureUse::kTraining && config.spec_augment.enabled;
  loader.spec_augment_options.freq_masks = config.spec_augment.freq_masks;
  loader.spec_augment_options.freq_width = config.spec_augment.freq_width;
  loader.spec_augment_options.time_masks = config.spec_augment.time_masks;
  loader.spec_augment_options.time_width_ratio = config.spec_augment.time_width_ratio;
}

}  // namespace mpiasr
