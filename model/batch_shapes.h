// The shapes of the batches a model will see, which its activation arena is
// planned for: every batch of B utterances padded to T input frames is one
// (B, T) pair. Each buffer needs the largest product of its own dimensions
// over those shapes, not the largest B times the largest T: a dynamic batch
// of 60 s holds many short utterances or a few long ones, never many long
// ones. With T1 = (T - 1) / 2 after the first stride-2 convolution and
// T2 = subsampled_frames(T) after the second:
//
//   input_rows   max B x T        features, the subsampling's input
//   conv1_rows   max B x T1       the first convolution's output
//   rows         max B x T2       every [rows, d] stream of the encoder
//
// (Attention keeps no B x T2 x T2 score tensor: it is fused, model/attention.h.)
// A batch fits the plan when each of its three products is within these
// (Conformer checks every batch).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "model/presets.h"
#include "src/base/error.h"

namespace mpiasr {

struct BatchShape {
  int batch = 0;   // B
  int frames = 0;  // T, input frames after padding
};

class BatchShapes {
 public:
  // Throws Error(kUsage) when `shapes` is empty or a shape has B < 1 or no
  // output frame.
  explicit BatchShapes(const std::vector<BatchShape>& shapes) {
    if (shapes.empty()) MPIASR_FAIL(ExitCode::kUsage, "model: no batch shape to plan for");
    for (const BatchShape& s : shapes) {
      if (s.batch < 1 || subsampled_frames(s.frames) < 1) {
        MPIASR_FAIL(ExitCode::kUsage, "model: a batch of " << s.batch << " x " << s.frames
                                                           << " frames leaves no output frame "
                                                              "(need >= 1 utterance of >= 7 "
                                                              "frames)");
      }
      max_batch_ = std::max(max_batch_, s.batch);
      max_frames_ = std::max(max_frames_, s.frames);
      const Products p = products(s);
      input_rows_ = std::max(input_rows_, p.input_rows);
      conv1_rows_ = std::max(conv1_rows_, p.conv1_rows);
      rows_ = std::max(rows_, p.rows);
    }
  }
  // Batches of up to `batch` utterances of up to `frames` frames each.
  BatchShapes(int batch, int frames) : BatchShapes(std::vector<BatchShape>{{batch, frames}}) {}

  int max_batch() const { return max_batch_; }
  int max_frames() const { return max_frames_; }
  size_t input_rows() const { return input_rows_; }
  size_t conv1_rows() const { return conv1_rows_; }
  size_t rows() const { return rows_; }

  bool fits(const BatchShape& shape) const {
    const Products p = products(shape);
    return shape.batch <= max_batch_ && shape.frames <= max_frames_ &&
           p.input_rows <= input_rows_ && p.conv1_rows <= conv1_rows_ && p.rows <= rows_;
  }

 private:
  struct Products {
    size_t input_rows, conv1_rows, rows;
  };
  static Products products(const BatchShape& s) {
    const size_t B = size_t(s.batch), T1 = size_t(std::max(0, (s.frames - 1) / 2)),
                 T2 = size_t(subsampled_frames(s.frames));
    return {B * size_t(s.frames), B * T1, B * T2};
  }

  int max_batch_ = 0, max_frames_ = 0;
  size_t input_rows_ = 0, conv1_rows_ = 0, rows_ = 0;
};

}  // namespace mpiasr
