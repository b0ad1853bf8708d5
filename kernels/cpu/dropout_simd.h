// The loops of dropout.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h): the mask applied tile by tile, and the
// backward pass.

// out[i] = value(i, factor) for i in [0, n), factor = 1 / (1 - p) where
// stream position offset + i is kept and 0 where it is dropped (0 < p < 1):
// tile by tile, the tile's bits drawn (fastest_draw_tile), then one pass over
// its elements. Compiled per level itself: the parallel loop's body is
// compiled with the function that holds it, not with the caller.
template <typename T, typename Value>
void apply_dropout(T* out, float p, uint64_t seed, uint64_t offset, size_t n, Value value) {
  if (n == 0) return;
  const DrawTile draw_tile = fastest_draw_tile();
  const T scale = T(1) / (T(1) - T(p));
  const uint32_t threshold = dropout_threshold(p);
  // Stream positions [offset, offset + n) lie in tiles [first_tile, end_tile).
  const int64_t first_tile = int64_t(offset / kTileElements);
  const int64_t end_tile = int64_t((offset + n + kTileElements - 1) / kTileElements);
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (int64_t tile = first_tile; tile < end_tile; ++tile) {
    uint32_t bits[kTileElements];
    draw_tile(bits, seed, uint64_t(tile));
    const uint64_t tile_start = uint64_t(tile) * kTileElements;
    const uint64_t begin = std::max(tile_start, offset);
    const uint64_t end = std::min(tile_start + kTileElements, offset + n);
    const uint32_t* tile_bits = bits + (begin - tile_start);
    const size_t first = size_t(begin - offset);
    const int count = int(end - begin);
    for (int e = 0; e < count; ++e)
      out[first + e] = value(first + e, tile_bits[e] >= threshold ? scale : T(0));
  }
}

template <typename T>
void cpu_dropout_backward(T* dinp, const T* dout, float scale, float p, uint64_t seed,
                          uint64_t offset, size_t n) {
  // The gradient passes through the same mask, then the branch's scale (a
  // product by 1 is exact, so scale 1 needs no case of its own).
  check_probability(p);
  const T s = T(scale);
  if (p == 0.0f || p == 1.0f) {
    cpu_dropout_forward(dinp, dout, p, seed, offset, n);
    if (scale == 1.0f) return;
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
    for (size_t i = 0; i < n; ++i) dinp[i] *= s;
    return;
  }
  apply_dropout(dinp, p, seed, offset, n, [&](size_t i, T factor) { return dout[i] * factor * s; });
}
