// Rotary position embedding, rotate-half form (GPT-NeoX, torchtune): the head
// vector x [Dh] is split into halves, and each pair (x[i], x[i + Dh/2]) is
// rotated by the angle  pos * theta_i,  theta_i = 10000^(-2i / Dh),  i < Dh/2,
// with pos the frame index:
//
//   y[i]        = x[i] cos - x[i + Dh/2] sin
//   y[i + Dh/2] = x[i + Dh/2] cos + x[i] sin
//
// The backward pass is the inverse rotation (angle negated). Angles are
// computed in double so both backends build the same cos/sin tables.
#pragma once

#include <math.h>

#include "kernels/hd.h"

namespace mpiasr {

constexpr double kRopeBase = 10000.0;

// The rotation angle of pair i (0 <= i < Dh/2) at position pos.
MPIASR_HD double rope_angle(int pos, int i, int head_dim) {
  return double(pos) * pow(kRopeBase, -2.0 * double(i) / double(head_dim));
}

// Rotates the pair (x1, x2) = (x[i], x[i + Dh/2]) by the angle with cosine c and
// sine s; the backward pass calls it with -s (the inverse rotation).
template <typename T>
MPIASR_HD void rope_rotate(T x1, T x2, T c, T s, T* y1, T* y2) {
  *y1 = x1 * c - x2 * s;
  *y2 = x2 * c + x1 * s;
}

}  // namespace mpiasr
