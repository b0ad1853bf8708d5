// What every layer's forward and backward receive: the backend, the
// parameters, the arena with the shared scratch buffers, and the shape of the
// current batch at the layer's time resolution.
//
// Scratch (Workspace) is shared by all layers and only valid within one layer
// call: rows[i] [rows, d_model], wide[i] [rows, wide_cols] (wide_cols covers
// 4d, 3d and 2d).
#pragma once

#include <cstdint>

#include "model/activation_arena.h"
#include "model/parameters.h"

namespace mpiasr {

template <typename Act>
struct Workspace {
  static constexpr int kRows = 3, kWide = 2;
  ArenaSlot<Act> rows[kRows];
  ArenaSlot<Act> wide[kWide];

  template <typename Acc>
  void reserve(ActivationArena<Act, Acc>& arena, size_t max_rows, int d_model, int wide_cols) {
    for (ArenaSlot<Act>& slot : rows) slot = arena.template reserve<Act>(max_rows * d_model);
    for (ArenaSlot<Act>& slot : wide) slot = arena.template reserve<Act>(max_rows * wide_cols);
  }
};

// A residual sum that a sub-layer leaves to the next one,
//   x = base + scale * Dropout(branch)     (dropout site dropout_offset)
// so the next LayerNorm adds it while it normalizes x
// (Backend::residual_layernorm_forward) instead of a pass of its own; without
// a branch, x is base itself.
template <typename Act>
struct PendingResidual {
  const Act* base = nullptr;
  const Act* branch = nullptr;
  float scale = 1.0f;
  uint64_t dropout_offset = 0;
};

// The Philox offset of the dropout site that follows parameter `param_index`:
// sites never share counters within a step (each may use up to 2^40 values);
// the caller's per-step seed separates steps.
inline uint64_t dropout_offset(int param_index) {
  return uint64_t(param_index) << 40;
}

template <typename Act, typename Acc>
struct LayerContext {
  Backend<Act, Acc>& backend;
  ParameterStore<Act, Acc>& params;
  const ActivationArena<Act, Acc>& arena;
  const Workspace<Act>& workspace;
  int batch = 0;                     // B
  int frames = 0;                    // T, padded frames at this resolution
  const int32_t* lengths = nullptr;  // host [B]: valid frames, 0 <= lengths[b] <= T
  float dropout = 0.0f;              // drop probability; 0 disables every dropout site
  uint64_t dropout_seed = 0;

  int rows() const { return batch * frames; }
  Act* scratch_rows(int i) const { return arena.get(workspace.rows[i]); }
  Act* scratch_wide(int i) const { return arena.get(workspace.wide[i]); }
};

}  // namespace mpiasr
