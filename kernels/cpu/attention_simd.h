// The loops of attention.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h): the attention's forward and backward, with
// the softmax down the columns of the transposed scores.

// st [L, ld] = exp(st - max) in place, the max and the sum taken down each
// column (a query's scores, over the L keys).
template <typename T>
void unnormalized_softmax_columns(T* st, int L, int ld, T* max, T* sums) {
  std::fill(max, max + ld, -std::numeric_limits<T>::infinity());
  for (int s = 0; s < L; ++s) {
    const T* row = st + int64_t(s) * ld;
#pragma omp simd
    for (int t = 0; t < ld; ++t) max[t] = max[t] > row[t] ? max[t] : row[t];
  }
  std::fill(sums, sums + ld, T(0));
  for (int s = 0; s < L; ++s) {
    T* row = st + int64_t(s) * ld;
#pragma omp simd
    for (int t = 0; t < ld; ++t) {
      row[t] = branchless_exp(row[t] - max[t]);
      sums[t] += row[t];
    }
  }
}

// From the scores st and dP^T dst [L, ld], by column (query) t: the
// probabilities P^T = exp(st - lse[t]) into st, and dS^T = P^T (dst - D[t])
// into dst.
template <typename T>
void probabilities_columns(T* st, T* dst, int L, int ld, const T* lse, const T* query_dot) {
  for (int s = 0; s < L; ++s) {
    T* p = st + int64_t(s) * ld;
    T* ds = dst + int64_t(s) * ld;
#pragma omp simd
    for (int t = 0; t < ld; ++t) {
      p[t] = branchless_exp(p[t] - lse[t]);
      ds[t] = p[t] * (ds[t] - query_dot[t]);
    }
  }
}

template <typename T>
void cpu_attention_forward(T* out, T* lse, const T* qkv, const int32_t* lengths, int B, int T_,
                           int H, int Dh, T scale) {
  check_lengths(lengths, B, T_);
  const RopeTable<T> table(T_, Dh);
  const int ld = padded_length(T_);
#pragma omp parallel if (parallel_worth(int64_t(B) * H * T_ * T_ * Dh))
  {
    // The thread's buffers, for any length up to T_ (left uninitialized: every use writes first).
    const size_t head = size_t(T_) * Dh;
    std::unique_ptr<T[]> q(new T[head]), k(new T[head]), v(new T[head]), ot(new T[size_t(Dh) * ld]);
    std::unique_ptr<T[]> st(new T[size_t(T_) * ld]), max(new T[size_t(ld)]),
        sums(new T[size_t(ld)]);
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < int64_t(B) * H; ++bh) {
      const int b = int(bh / H), h = int(bh % H), L = lengths[b];
      T* lse_row = lse + bh * T_;
      if (L == 0) {
        for (int t = 0; t < T_; ++t) {
          std::fill_n(out + ((int64_t(b) * T_ + t) * H + h) * Dh, Dh, T(0));
          lse_row[t] = -std::numeric_limits<T>::infinity();
        }
        continue;
      }
      gather_head(q.get(), qkv, table, b, h, 0, T_, T_, H, Dh);
      gather_head(k.get(), qkv, table, b, h, 1, L, T_, H, Dh);
      gather_head(v.get(), qkv, table, b, h, 2, L, T_, H, Dh);
      // S^T = scale k q^T [L, ld], a column per query; padding columns 0.
      blas_gemm<T>(false, true, L, T_, Dh, scale, k.get(), Dh, q.get(), Dh, T(0), st.get(), ld);
      zero_padding_columns(st.get(), L, T_, ld);
      unnormalized_softmax_columns(st.get(), L, ld, max.get(), sums.get());
      for (int t = 0; t < T_; ++t) lse_row[t] = max[t] + std::log(sums[t]);
      // o^T = v^T exp(S^T - max) [Dh, ld], then each query's outputs divided
      // by its sum: Dh divisions a query instead of L.
      blas_gemm<T>(true, false, Dh, T_, L, T(1), v.get(), Dh, st.get(), ld, T(0), ot.get(), ld);
      for (int t = 0; t < T_; ++t) {
        const T inv = T(1) / sums[t];
        T* out_row = out + ((int64_t(b) * T_ + t) * H + h) * Dh;
        for (int d = 0; d < Dh; ++d) out_row[d] = ot[int64_t(d) * ld + t] * inv;
      }
    }
  }
}

template <typename T>
void cpu_attention_backward(T* dqkv, const T* dout, const T* out, const T* lse, const T* qkv,
                            const int32_t* lengths, int B, int T_, int H, int Dh, T scale) {
  check_lengths(lengths, B, T_);
  const RopeTable<T> table(T_, Dh);
  const int ld = padded_length(T_);
#pragma omp parallel if (parallel_worth(int64_t(B) * H * T_ * T_ * Dh))
  {
    // The thread's buffers, for any length up to T_ (left uninitialized: every use writes first).
    const size_t head = size_t(T_) * Dh, scores = size_t(T_) * ld;
    std::unique_ptr<T[]> q(new T[head]), k(new T[head]), v(new T[head]), d_out(new T[head]);
    std::unique_ptr<T[]> dq(new T[head]), dk(new T[head]), dv(new T[head]);
    std::unique_ptr<T[]> pt(new T[scores]), dst(new T[scores]);
    std::unique_ptr<T[]> column_lse(new T[size_t(ld)]), query_dot(new T[size_t(ld)]);
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < int64_t(B) * H; ++bh) {
      const int b = int(bh / H), h = int(bh % H), L = lengths[b];
      if (L == 0) {
        std::fill_n(dq.get(), head, T(0));
      } else {
        gather_head(q.get(), qkv, table, b, h, 0, T_, T_, H, Dh);
        gather_head(k.get(), qkv, table, b, h, 1, L, T_, H, Dh);
        gather_head(v.get(), qkv, table, b, h, 2, L, T_, H, Dh);
        gather_rows(d_out.get(), dout, b, h, T_, H, Dh);
        // lse and D_t = dout_t . out_t by query; the padding columns get 0
        // (and, with dP^T = 0 there, dS^T = 0).
        std::copy_n(lse + bh * T_, T_, column_lse.get());
        std::fill(column_lse.get() + T_, column_lse.get() + ld, T(0));
        std::fill(query_dot.get() + T_, query_dot.get() + ld, T(0));
        for (int t = 0; t < T_; ++t) {
          const T* out_row = out + ((int64_t(b) * T_ + t) * H + h) * Dh;
          T dot = T(0);
          for (int d = 0; d < Dh; ++d) dot += d_out[size_t(t) * Dh + d] * out_row[d];
          query_dot[size_t(t)] = dot;
        }
        // P^T = exp(scale k q^T - lse) [L, ld]; dP^T = v dout^T; dS^T = P^T (dP^T - D);
        // dv = P^T dout; dk = scale dS^T q; dq = scale dS k.
        blas_gemm<T>(false, true, L, T_, Dh, scale, k.get(), Dh, q.get(), Dh, T(0), pt.get(), ld);
        blas_gemm<T>(false, true, L, T_, Dh, T(1), v.get(), Dh, d_out.get(), Dh, T(0), dst.get(),
                     ld);
        zero_padding_columns(pt.get(), L, T_, ld);
        zero_padding_columns(dst.get(), L, T_, ld);
        probabilities_columns(pt.get(), dst.get(), L, ld, column_lse.get(), query_dot.get());
        blas_gemm<T>(false, false, L, Dh, T_, T(1), pt.get(), ld, d_out.get(), Dh, T(0), dv.get(),
                     Dh);
        blas_gemm<T>(false, false, L, Dh, T_, scale, dst.get(), ld, q.get(), Dh, T(0), dk.get(),
                     Dh);
        blas_gemm<T>(true, false, T_, Dh, L, scale, dst.get(), ld, k.get(), Dh, T(0), dq.get(), Dh);
      }
      scatter_head(dqkv, dq.get(), table, b, h, 0, T_, T_, H, Dh);
      scatter_head(dqkv, dk.get(), table, b, h, 1, L, T_, H, Dh);
      scatter_head(dqkv, dv.get(), table, b, h, 2, L, T_, H, Dh);
    }
  }
}
