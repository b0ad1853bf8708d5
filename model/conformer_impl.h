// Definitions of Conformer (model/conformer.h), included by the translation
// units that instantiate it for their <Act, Acc> (model/conformer.cpp for the
// CPU types; the CUDA library for <__half, float> and <__nv_bfloat16, float>).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include "kernels/ctc_check.h"
#include "kernels/ctc_math.h"
#include "model/conformer.h"
#include "model/conformer_block_impl.h"
#include "model/subsampling_impl.h"

namespace mpiasr {

namespace detail {
inline const ConformerConfig& validated(const ConformerConfig& config) {
  validate_config(config);
  return config;
}
// How the batch names utterance b in messages: its manifest index if known.
inline std::string utterance_name(const BatchView& batch, int b) {
  std::ostringstream out;
  out << "utterance " << b << " of the batch";
  if (size_t(b) < batch.utterance_indices.size()) {
    out << " (manifest entry " << batch.utterance_indices[size_t(b)] << ")";
  }
  return out.str();
}
}  // namespace detail

template <typename Act, typename Acc>
Conformer<Act, Acc>::Conformer(Backend<Act, Acc>& backend, const ConformerConfig& config,
                               const BatchShapes& shapes, uint64_t init_seed,
                               size_t parameter_multiple)
    : backend_(backend),
      config_(detail::validated(config)),
      shapes_(shapes),
      params_(backend, parameter_multiple),
      arena_(backend),
      subsampling_(params_, arena_, "encoder.subsampling", config.n_mels,
                   config.subsampling_channels, config.d_model, shapes,
                   backend.subsampling_da1_scratch()) {
  const int d = config.d_model;
  const size_t max_rows = shapes.rows();
  blocks_.reserve(size_t(config.n_layers));
  for (int i = 0; i < config.n_layers; ++i) {
    blocks_.emplace_back(params_, arena_, "encoder.layers." + std::to_string(i), config, max_rows);
  }
  head_ = Linear<Act, Acc>(params_, "ctc_head", d, config.vocab_size);
  MPIASR_CHECK(params_.num_parameters() == count_parameters(config),
               "registered " << params_.num_parameters() << " parameters, count_parameters says "
                             << count_parameters(config));

  const int wide_cols = std::max({config.ff_mult * d, 3 * d, 2 * d});
  workspace_.reserve(arena_, max_rows, d, wide_cols);
  logits_ = arena_.template reserve<Act>(max_rows * config.vocab_size);
  dlogits_ = arena_.template reserve<Act>(max_rows * config.vocab_size);
  logprobs_ = arena_.template reserve<Acc>(max_rows * config.vocab_size);
  grad_a_ = arena_.template reserve<Act>(max_rows * d);
  grad_b_ = arena_.template reserve<Act>(max_rows * d);
  losses_ = arena_.template reserve<double>(size_t(shapes.max_batch()));
  loss_scale_ = arena_.template reserve<float>(1);
  params_.allocate(init_seed);
  arena_.allocate();
  out_lengths_.resize(size_t(shapes.max_batch()));
  grad_scale_.resize(size_t(shapes.max_batch()));
  block_inputs_.resize(blocks_.size());
}

template <typename Act, typename Acc>
int Conformer<Act, Acc>::prepare(const BatchView& batch) {
  const int B = batch.batch_size, T = batch.max_frames;
  if (batch.n_mels != config_.n_mels) {
    MPIASR_FAIL(ExitCode::kBadInput,
                "batch has " << batch.n_mels << " mel bins, the model " << config_.n_mels);
  }
  const int T2 = subsampled_frames(T);
  if (B < 1 || T2 < 1) {
    MPIASR_FAIL(ExitCode::kBadInput, "batch of " << B << " x " << T
                                                 << " frames leaves no frame after subsampling "
                                                    "(need >= 1 utterance of >= 7 frames)");
  }
  if (!shapes_.fits({B, T})) {
    MPIASR_FAIL(ExitCode::kBadInput,
                "batch of " << B << " x " << T << " frames does not fit the model's plan (at most "
                            << shapes_.max_batch() << " utterances, " << shapes_.max_frames()
                            << " frames, " << shapes_.input_rows() << " utterance-frames)");
  }
  MPIASR_CHECK(batch.features.size() >= size_t(B) * T * batch.n_mels &&
                   batch.frame_lengths.size() >= size_t(B) &&
                   batch.target_lengths.size() >= size_t(B),
               "batch buffers smaller than its shape");
  for (int b = 0; b < B; ++b) {
    const int L = batch.frame_lengths[size_t(b)];
    if (L < 0 || L > T) {
      MPIASR_FAIL(ExitCode::kBadInput, detail::utterance_name(batch, b)
                                           << " has frame length " << L << " outside [0, " << T
                                           << "]");
    }
    out_lengths_[size_t(b)] = subsampled_frames(L);
  }
  return T2;
}

template <typename Act, typename Acc>
LayerContext<Act, Acc> Conformer<Act, Acc>::context(int batch_size, int frames, float dropout,
                                                    uint64_t seed) {
  LayerContext<Act, Acc> ctx{backend_, params_, arena_, workspace_};
  ctx.batch = batch_size;
  ctx.frames = frames;
  ctx.lengths = out_lengths_.data();
  ctx.dropout = dropout;
  ctx.dropout_seed = seed;
  return ctx;
}

template <typename Act, typename Acc>
const Act* Conformer<Act, Acc>::forward(LayerContext<Act, Acc>& ctx, const BatchView& batch) {
  last_batch_ = ctx.batch;
  last_frames_ = ctx.frames;
  const Act* x = subsampling_.forward(ctx, batch.features.data(), batch.max_frames);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    block_inputs_[i] = x;
    x = blocks_[i].forward(ctx, x);
  }
  head_.forward(ctx, arena_.get(logits_), x, ctx.rows());
  backend_.log_softmax_forward(arena_.get(logprobs_), arena_.get(logits_), ctx.rows(),
                               config_.vocab_size);
  last_input_frames_ = batch.max_frames;
  last_encoded_ = x;
  return x;
}

template <typename Act, typename Acc>
void Conformer<Act, Acc>::backward(LayerContext<Act, Acc>& ctx, const Act* encoded,
                                   int input_frames,
                                   const std::function<void(size_t, size_t)>& on_grads_ready) {
  auto ready = [&](int first, int last) {
    if (!on_grads_ready || first == last) return;
    auto [offset, count] = params_.range(first, last);
    on_grads_ready(offset, count);
  };
  Act* d_out = arena_.get(grad_a_);
  Act* d_in = arena_.get(grad_b_);
  head_.backward(ctx, d_out, arena_.get(dlogits_), encoded, ctx.rows());
  ready(head_.weight_index(), head_.bias_index() + 1);
  for (int i = int(blocks_.size()) - 1; i >= 0; --i) {
    blocks_[size_t(i)].backward(ctx, block_inputs_[size_t(i)], d_out, d_in);
    std::swap(d_out, d_in);
    ready(blocks_[size_t(i)].first_parameter(), blocks_[size_t(i)].last_parameter());
  }
  subsampling_.backward(ctx, d_out, input_frames, ready);
}

template <typename Act, typename Acc>
std::vector<double> Conformer<Act, Acc>::forward_backward(
    const BatchView& batch, double loss_divisor, float loss_scale, bool zero_infinity,
    uint64_t dropout_seed, const std::function<void(size_t, size_t)>& on_grads_ready) {
  float* device_scale = arena_.get(loss_scale_);
  backend_.to_device(device_scale, &loss_scale, sizeof loss_scale);
  forward_backward(batch, loss_divisor, device_scale, zero_infinity, dropout_seed, nullptr,
                   on_grads_ready);
  std::vector<double> losses(size_t(batch.batch_size));
  backend_.to_host(losses.data(), arena_.get(losses_), losses.size() * sizeof(double));
  for (int b : infeasible_) losses[size_t(b)] = 0.0;
  return losses;
}

template <typename Act, typename Acc>
void Conformer<Act, Acc>::forward_backward(
    const BatchView& batch, double loss_divisor, const float* loss_scale, bool zero_infinity,
    uint64_t dropout_seed, double* loss_sum,
    const std::function<void(size_t, size_t)>& on_grads_ready) {
  const int B = batch.batch_size, V = config_.vocab_size;
  const int T2 = prepare(batch);
  MPIASR_CHECK(loss_divisor > 0.0, "loss_divisor = " << loss_divisor);

  // Targets: tokens in [1, V); an utterance is infeasible when its output
  // frames cannot hold the tokens plus one blank between repeated tokens.
  size_t total_tokens = 0;
  for (int b = 0; b < B; ++b) total_tokens += size_t(std::max(batch.target_lengths[size_t(b)], 0));
  MPIASR_CHECK(batch.targets.size() >= total_tokens, "batch targets smaller than target_lengths");
  if (const std::optional<CtcTargetProblem> problem =
          find_ctc_target_problem(batch.targets.data(), batch.target_lengths.data(), B, V)) {
    MPIASR_FAIL(ExitCode::kBadInput, detail::utterance_name(batch, problem->utterance)
                                         << " has " << problem->what);
  }
  std::vector<int>& infeasible = infeasible_;
  infeasible.clear();
  const double scale = 1.0 / loss_divisor;
  size_t start = 0;
  for (int b = 0; b < B; ++b) {
    const int U = batch.target_lengths[size_t(b)];
    const bool feasible =
        out_lengths_[size_t(b)] >= ctc_min_frames(batch.targets.data() + start, U);
    start += size_t(U);
    if (!feasible) infeasible.push_back(b);
    grad_scale_[size_t(b)] = feasible ? scale : 0.0;
  }
  if (!infeasible.empty() && !zero_infinity) {
    std::ostringstream names;
    for (int b : infeasible) {
      names << "\n  " << detail::utterance_name(batch, b) << ": " << batch.frame_lengths[size_t(b)]
            << " frames -> " << out_lengths_[size_t(b)] << " after subsampling, "
            << batch.target_lengths[size_t(b)] << " target tokens";
    }
    MPIASR_FAIL(ExitCode::kBadInput,
                "CTC loss is infinite (too few frames for the targets; "
                "enable zero_infinity to skip them):"
                    << names.str());
  }

  LayerContext<Act, Acc> ctx = context(B, T2, config_.dropout, dropout_seed);
  const Act* encoded = forward(ctx, batch);
  backend_.ctc_loss(arena_.get(losses_), arena_.get(dlogits_), arena_.get(logprobs_),
                    batch.targets.data(), batch.target_lengths.data(), out_lengths_.data(),
                    grad_scale_.data(), loss_scale, loss_sum, B, T2, V);
  backward(ctx, encoded, batch.max_frames, on_grads_ready);
}

template <typename Act, typename Acc>
template <typename Host>
void Conformer<Act, Acc>::infer_to_host(const BatchView& batch, std::vector<Host>& logprobs,
                                        std::vector<int32_t>& out_lengths) {
  const int B = batch.batch_size, V = config_.vocab_size;
  const int T2 = prepare(batch);
  LayerContext<Act, Acc> ctx = context(B, T2, 0.0f, 0);
  forward(ctx, batch);
  const size_t n = size_t(B) * T2 * V;
  if constexpr (std::is_same_v<Acc, Host>) {
    logprobs.resize(n);
    backend_.to_host(logprobs.data(), arena_.get(logprobs_), n * sizeof(Host));
  } else {
    std::vector<Acc> host(n);
    backend_.to_host(host.data(), arena_.get(logprobs_), n * sizeof(Acc));
    logprobs.assign(host.begin(), host.end());
  }
  out_lengths.assign(out_lengths_.begin(), out_lengths_.begin() + B);
}

template <typename Act, typename Acc>
void Conformer<Act, Acc>::infer(const BatchView& batch, std::vector<float>& logprobs,
                                std::vector<int32_t>& out_lengths) {
  infer_to_host(batch, logprobs, out_lengths);
}

template <typename Act, typename Acc>
void Conformer<Act, Acc>::infer(const BatchView& batch, std::vector<double>& logprobs,
                                std::vector<int32_t>& out_lengths) {
  infer_to_host(batch, logprobs, out_lengths);
}

template <typename Act, typename Acc>
void Conformer<Act, Acc>::backward_from_logits(const double* dlogits) {
  MPIASR_CHECK(last_encoded_ != nullptr, "backward_from_logits before any forward");
  const size_t n = size_t(last_batch_) * size_t(last_frames_) * size_t(config_.vocab_size);
  std::vector<Act> host(n);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<Act, double>) {
      host[i] = dlogits[i];
    } else {
      host[i] = Act(float(dlogits[i]));  // via float: __half and bfloat16 convert from it
    }
  }
  backend_.to_device(arena_.get(dlogits_), host.data(), n * sizeof(Act));
  LayerContext<Act, Acc> ctx = context(last_batch_, last_frames_, 0.0f, 0);
  backward(ctx, last_encoded_, last_input_frames_, {});
}

template <typename Act, typename Acc>
void Conformer<Act, Acc>::add_blank_statistics(BlankStatistics& stats) {
  const size_t n = size_t(last_batch_) * size_t(last_frames_) * size_t(config_.vocab_size);
  std::vector<Acc> host(n);
  backend_.to_host(host.data(), arena_.get(logprobs_), n * sizeof(Acc));
  const std::vector<float> values(host.begin(), host.end());
  mpiasr::add_blank_statistics(stats, values.data(), out_lengths_.data(), last_batch_, last_frames_,
                               config_.vocab_size);
}

template <typename Act, typename Acc>
std::vector<ParameterGroup> Conformer<Act, Acc>::parameter_groups() const {
  std::vector<ParameterGroup> groups = {
      {"encoder.subsampling", 0, blocks_.front().first_parameter()}};
  for (size_t i = 0; i < blocks_.size(); ++i) {
    groups.push_back({"encoder.layers." + std::to_string(i), blocks_[i].first_parameter(),
                      blocks_[i].last_parameter()});
  }
  groups.push_back({"ctc_head", head_.weight_index(), head_.bias_index() + 1});
  return groups;
}

}  // namespace mpiasr
