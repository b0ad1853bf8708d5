// Every CudaBackend operation against the CPU backend (CpuBackend<float>) on
// random inputs that are first rounded to half, so both backends see the same
// values. Skipped without a CUDA device; in the emulation build they run on
// the CPU (kernels/cuda_emu), as ctest's emu.* entries.
//
// Tolerances (|gpu - cpu| <= atol + rtol |cpu|):
//   half outputs          rtol 2e-3: one half rounding (2^-11 = 4.9e-4) plus
//                         float differences in the order of operations; atol
//                         2e-3 for values of order 1 that cancel
//   float outputs         (weight gradients, statistics, log-probs, AdamW)
//                         rtol 1e-4 / atol 1e-5: fp32 accumulation in another order
//   exact                 casts, copies, masks, dropout's pattern of zeros
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/ctc_loss.h"
#include "tests/cuda/cuda_test_util.h"

namespace mpiasr {
namespace {

using cuda_test::backend;
using cuda_test::download;
using cuda_test::expect_close;
using cuda_test::random_floats;
using cuda_test::rounded_to_half;
using cuda_test::upload_float;
using cuda_test::upload_half;

constexpr double kHalfRtol = 2e-3, kHalfAtol = 2e-3;
constexpr double kFloatRtol = 1e-4, kFloatAtol = 1e-5;

CpuBackend<float>& cpu() {
  static CpuBackend<float> instance(1);
  return instance;
}

// Random values rounded to half.
std::vector<float> half_values(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return rounded_to_half(random_floats(n, seed, lo, hi));
}

TEST(CudaCasts, MatchHostConversionsExactly) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  std::vector<float> x = random_floats(1000, 1, -70000.0f, 70000.0f);
  x.insert(x.end(), {0.0f, -0.0f, 1e-8f, 65504.0f, 65520.0f, 1e9f, -1e9f, 3.14159f});
  auto src = upload_float(be, x);
  cuda_test::DeviceArray<__half> half(be, x.size());
  cuda_test::DeviceArray<float> back(be, x.size());
  be.cast_f32_to_act(half.get(), src->get(), x.size());
  be.cast_act_to_acc(back.get(), half.get(), x.size());
  const std::vector<float> round_trip = download(be, back.get(), x.size());
  const std::vector<float> expected = rounded_to_half(x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(std::memcmp(&round_trip[i], &expected[i], sizeof(float)), 0)
        << x[i] << " -> " << round_trip[i] << ", expected " << expected[i];
  }
  be.cast_acc_to_act(half.get(), src->get(), x.size());
  EXPECT_EQ(download(be, half.get(), x.size()), round_trip);
}

TEST(CudaElementwise, AddScaledAccumulateScaledAndMaskPadding) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  const int B = 3, T = 7, C = 5;
  const size_t n = size_t(B) * T * C;
  const auto x = half_values(n, 2), r = half_values(n, 3);
  auto dx = upload_half(be, x), dr = upload_half(be, r);
  cuda_test::DeviceArray<__half> y(be, n);
  be.add_scaled(y.get(), dx->get(), dr->get(), 0.5f, n);
  std::vector<float> expected(n);
  cpu().add_scaled(expected.data(), x.data(), r.data(), 0.5f, n);
  expect_close(download(be, y.get(), n), expected, kHalfRtol, kHalfAtol, "add_scaled");

  be.accumulate_scaled(dx->get(), dr->get(), -1.5f, n);
  std::vector<float> accumulated = x;
  cpu().accumulate_scaled(accumulated.data(), r.data(), -1.5f, n);
  expect_close(download(be, dx->get(), n), accumulated, kHalfRtol, kHalfAtol, "accumulate_scaled");

  const int32_t lengths[B] = {7, 2, 0};
  be.mask_padding(dr->get(), lengths, B, T, C);
  std::vector<float> masked = r;
  cpu().mask_padding(masked.data(), lengths, B, T, C);
  EXPECT_EQ(download(be, dr->get(), n), masked);
  const int32_t too_long[B] = {8, 1, 1};
  EXPECT_THROW(be.mask_padding(dr->get(), too_long, B, T, C), Error);
}

// C[b] = alpha op(A[b]) op(B[b]) + beta C[b] for every transpose combination.
TEST(CudaGemm, BatchedStridedMatchesCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  const int M = 37, N = 29, K = 45, batch = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const int lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
      const int64_t sa = int64_t(M) * K + 5, sb = int64_t(K) * N + 3, sc = int64_t(M) * N + 7;
      const auto a = half_values(size_t(sa) * batch, 10), b = half_values(size_t(sb) * batch, 11);
      const auto c = half_values(size_t(sc) * batch, 12);
      auto da = upload_half(be, a), db = upload_half(be, b), dc = upload_half(be, c);
      be.gemm(ta, tb, M, N, K, 0.7f, da->get(), lda, sa, db->get(), ldb, sb, 0.5f, dc->get(), ldc,
              sc, batch);
      std::vector<float> expected = c;
      cpu().gemm(ta, tb, M, N, K, 0.7f, a.data(), lda, sa, b.data(), ldb, sb, 0.5f, expected.data(),
                 ldc, sc, batch);
      expect_close(download(be, dc->get(), c.size()), expected, kHalfRtol, kHalfAtol,
                   std::string("gemm ta=") + (ta ? "1" : "0") + " tb=" + (tb ? "1" : "0"));
    }
  }
}

TEST(CudaLinear, ForwardAndBackwardAccumulateLikeCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  const int M = 300, K = 48, N = 40;  // M > 32 rows: several column-sum chunks
  const auto inp = half_values(size_t(M) * K, 20), w = half_values(size_t(N) * K, 21);
  const auto bias = half_values(size_t(N), 22), dout = half_values(size_t(M) * N, 23);
  const auto dw0 = random_floats(size_t(N) * K, 24), db0 = random_floats(size_t(N), 25);
  auto d_inp = upload_half(be, inp), d_w = upload_half(be, w), d_bias = upload_half(be, bias);
  auto d_dout = upload_half(be, dout);
  auto d_dw = upload_float(be, dw0), d_db = upload_float(be, db0);
  cuda_test::DeviceArray<__half> out(be, size_t(M) * N), dinp(be, size_t(M) * K);

  be.linear_forward(out.get(), d_inp->get(), d_w->get(), d_bias->get(), M, K, N);
  std::vector<float> expected_out(size_t(M) * N);
  cpu().linear_forward(expected_out.data(), inp.data(), w.data(), bias.data(), M, K, N);
  expect_close(download(be, out.get(), out.size()), expected_out, kHalfRtol, kHalfAtol, "out");

  be.linear_forward(out.get(), d_inp->get(), d_w->get(), nullptr, M, K, N);
  cpu().linear_forward(expected_out.data(), inp.data(), w.data(), nullptr, M, K, N);
  expect_close(download(be, out.get(), out.size()), expected_out, kHalfRtol, kHalfAtol,
               "out without bias");

  be.linear_backward(dinp.get(), d_dw->get(), d_db->get(), d_dout->get(), d_inp->get(), d_w->get(),
                     M, K, N);
  std::vector<float> expected_dinp(size_t(M) * K), expected_dw = dw0, expected_db = db0;
  cpu().linear_backward(expected_dinp.data(), expected_dw.data(), expected_db.data(), dout.data(),
                        inp.data(), w.data(), M, K, N);
  expect_close(download(be, dinp.get(), dinp.size()), expected_dinp, kHalfRtol, kHalfAtol, "dinp");
  expect_close(download(be, d_dw->get(), dw0.size()), expected_dw, kFloatRtol, 1e-4, "dweight");
  expect_close(download(be, d_db->get(), db0.size()), expected_db, kFloatRtol, 1e-4, "dbias");
}

// With the default chunking (all images at once) and with one image per chunk.
TEST(CudaConv2d, ForwardAndBackwardMatchCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend one_image_chunks(
      CudaBackendOptions{.arena_bytes = cuda_test::kTestArenaBytes, .conv2d_column_budget = 1});
  for (CudaBackend* be : {&backend(), &one_image_chunks}) {
    for (int Cin : {1, 3}) {
      const int B = 3, H = 13, W = 10, Cout = 8;
      const int Ho = (H - 3) / 2 + 1, Wo = (W - 3) / 2 + 1;
      const size_t n_in = size_t(B) * H * W * Cin, n_out = size_t(B) * Ho * Wo * Cout;
      const size_t n_w = size_t(Cout) * Cin * 9;
      const auto inp = half_values(n_in, 30), w = half_values(n_w, 31);
      const auto bias = half_values(size_t(Cout), 32), dout = half_values(n_out, 33);
      const auto dw0 = random_floats(n_w, 34), db0 = random_floats(size_t(Cout), 35);
      auto d_inp = upload_half(*be, inp), d_w = upload_half(*be, w);
      auto d_bias = upload_half(*be, bias), d_dout = upload_half(*be, dout);
      auto d_dw = upload_float(*be, dw0), d_db = upload_float(*be, db0);
      cuda_test::DeviceArray<__half> out(*be, n_out), dinp(*be, n_in);
      const std::string what = "Cin " + std::to_string(Cin) +
                               (be == &backend() ? ", one chunk" : ", one image per chunk");

      be->conv2d_forward(out.get(), d_inp->get(), d_w->get(), d_bias->get(), B, Cin, H, W, Cout);
      std::vector<float> expected_out(n_out);
      cpu().conv2d_forward(expected_out.data(), inp.data(), w.data(), bias.data(), B, Cin, H, W,
                           Cout);
      expect_close(download(*be, out.get(), n_out), expected_out, kHalfRtol, kHalfAtol,
                   "conv2d out, " + what);

      be->conv2d_backward(dinp.get(), d_dw->get(), d_db->get(), d_dout->get(), d_inp->get(),
                          d_w->get(), B, Cin, H, W, Cout);
      std::vector<float> expected_dinp(n_in), expected_dw = dw0, expected_db = db0;
      cpu().conv2d_backward(expected_dinp.data(), expected_dw.data(), expected_db.data(),
                            dout.data(), inp.data(), w.data(), B, Cin, H, W, Cout);
      expect_close(download(*be, dinp.get(), n_in), expected_dinp, kHalfRtol, kHalfAtol,
                   "conv2d dinp, " + what);
      expect_close(download(*be, d_dw->get(), n_w), expected_dw, kFloatRtol, 1e-4,
                   "conv2d dweight, " + what);
      expect_close(download(*be, d_db->get(), size_t(Cout)), expected_db, kFloatRtol, 1e-4,
                   "conv2d dbias, " + what);
    }
  }
}

TEST(CudaLayerNorm, ForwardStatisticsAndAccumulatingBackward) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  for (int C : {24, 256, 300}) {
    const int N = 150;
    const size_t n = size_t(N) * C;
    const auto inp = half_values(n, 40, -2.0f, 3.0f), w = half_values(size_t(C), 41);
    const auto bias = half_values(size_t(C), 42), dout = half_values(n, 43);
    const auto dinp0 = half_values(n, 44);
    const auto dw0 = random_floats(size_t(C), 45), db0 = random_floats(size_t(C), 46);
    auto d_inp = upload_half(be, inp), d_w = upload_half(be, w), d_bias = upload_half(be, bias);
    auto d_dout = upload_half(be, dout), d_dinp = upload_half(be, dinp0);
    auto d_dw = upload_float(be, dw0), d_db = upload_float(be, db0);
    cuda_test::DeviceArray<__half> out(be, n);
    cuda_test::DeviceArray<float> mean(be, size_t(N)), rstd(be, size_t(N));
    const std::string what = "C " + std::to_string(C);

    be.layernorm_forward(out.get(), mean.get(), rstd.get(), d_inp->get(), d_w->get(), d_bias->get(),
                         N, C, 1e-5f);
    std::vector<float> expected_out(n), expected_mean(N), expected_rstd(N);
    cpu().layernorm_forward(expected_out.data(), expected_mean.data(), expected_rstd.data(),
                            inp.data(), w.data(), bias.data(), N, C, 1e-5f);
    expect_close(download(be, out.get(), n), expected_out, kHalfRtol, kHalfAtol, "out, " + what);
    expect_close(download(be, mean.get(), size_t(N)), expected_mean, kFloatRtol, kFloatAtol,
                 "mean, " + what);
    expect_close(download(be, rstd.get(), size_t(N)), expected_rstd, kFloatRtol, kFloatAtol,
                 "rstd, " + what);

    be.layernorm_backward(d_dinp->get(), d_dw->get(), d_db->get(), d_dout->get(), d_inp->get(),
                          d_w->get(), mean.get(), rstd.get(), N, C);
    std::vector<float> expected_dinp = dinp0, expected_dw = dw0, expected_db = db0;
    cpu().layernorm_backward(expected_dinp.data(), expected_dw.data(), expected_db.data(),
                             dout.data(), inp.data(), w.data(), expected_mean.data(),
                             expected_rstd.data(), N, C);
    expect_close(download(be, d_dinp->get(), n), expected_dinp, kHalfRtol, kHalfAtol,
                 "dinp, " + what);
    expect_close(download(be, d_dw->get(), size_t(C)), expected_dw, kFloatRtol, 1e-4,
                 "dweight, " + what);
    expect_close(download(be, d_db->get(), size_t(C)), expected_db, kFloatRtol, 1e-4,
                 "dbias, " + what);
  }
}

TEST(CudaActivations, ReluSwishGluForwardAndBackward) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  const int N = 64, C = 40;
  const size_t n = size_t(N) * 2 * C;
  const auto x = half_values(n, 50, -6.0f, 6.0f), dy = half_values(n, 51);
  auto d_x = upload_half(be, x), d_dy = upload_half(be, dy);
  cuda_test::DeviceArray<__half> out(be, n);
  std::vector<float> expected(n);

  be.relu_forward(out.get(), d_x->get(), n);
  cpu().relu_forward(expected.data(), x.data(), n);
  EXPECT_EQ(download(be, out.get(), n), expected);
  be.relu_backward(out.get(), d_dy->get(), d_x->get(), n);
  cpu().relu_backward(expected.data(), dy.data(), x.data(), n);
  EXPECT_EQ(download(be, out.get(), n), expected);

  be.swish_forward(out.get(), d_x->get(), n);
  cpu().swish_forward(expected.data(), x.data(), n);
  expect_close(download(be, out.get(), n), expected, kHalfRtol, kHalfAtol, "swish");
  be.swish_backward(out.get(), d_dy->get(), d_x->get(), n);
  cpu().swish_backward(expected.data(), dy.data(), x.data(), n);
  expect_close(download(be, out.get(), n), expected, kHalfRtol, kHalfAtol, "swish backward");

  // GLU: inp [N, 2C] -> [N, C]; dy's first N C values serve as the upstream gradient.
  be.glu_forward(out.get(), d_x->get(), N, C);
  std::vector<float> expected_glu(size_t(N) * C);
  cpu().glu_forward(expected_glu.data(), x.data(), N, C);
  expect_close(download(be, out.get(), size_t(N) * C), expected_glu, kHalfRtol, kHalfAtol, "glu");
  be.glu_backward(out.get(), d_dy->get(), d_x->get(), N, C);
  cpu().glu_backward(expected.data(), dy.data(), x.data(), N, C);
  expect_close(download(be, out.get(), n), expected, kHalfRtol, kHalfAtol, "glu backward");
}

// The same elements are dropped as on the CPU, bit for bit, at any offset.
TEST(CudaDropout, MaskIdenticalToCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  const size_t n = 10007;
  const auto x = half_values(n, 60);
  for (uint64_t offset : {uint64_t(0), uint64_t(13), (uint64_t(5) << 40) + 3}) {
    auto d_x = upload_half(be, x);
    cuda_test::DeviceArray<__half> out(be, n);
    be.dropout_forward(out.get(), d_x->get(), 0.3f, 1234, offset, n);
    std::vector<float> expected(n);
    cpu().dropout_forward(expected.data(), x.data(), 0.3f, 1234, offset, n);
    const std::vector<float> got = download(be, out.get(), n);
    size_t dropped = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(got[i] == 0.0f, expected[i] == 0.0f) << "element " << i << " offset " << offset;
      dropped += expected[i] == 0.0f;
    }
    EXPECT_NEAR(double(dropped) / n, 0.3, 0.02);
    expect_close(got, expected, kHalfRtol, kHalfAtol, "dropout values");

    // In place, and backward (the same map on the gradient).
    be.dropout_backward(d_x->get(), d_x->get(), 0.3f, 1234, offset, n);
    EXPECT_EQ(download(be, d_x->get(), n), got);
  }
  auto d_x = upload_half(be, x);
  cuda_test::DeviceArray<__half> out(be, n);
  be.dropout_forward(out.get(), d_x->get(), 0.0f, 1, 0, n);
  EXPECT_EQ(download(be, out.get(), n), x);
  be.dropout_forward(out.get(), d_x->get(), 1.0f, 1, 0, n);
  EXPECT_EQ(download(be, out.get(), n), std::vector<float>(n, 0.0f));
}

TEST(CudaAttention, QkvSplitRopeMergeHeadsAndMaskedSoftmax) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  const int B = 3, T = 50, H = 2, Dh = 8;
  const size_t n_qkv = size_t(B) * T * 3 * H * Dh, n_head = size_t(B) * H * T * Dh;
  const auto qkv = half_values(n_qkv, 70);
  auto d_qkv = upload_half(be, qkv);
  cuda_test::DeviceArray<__half> q(be, n_head), k(be, n_head), v(be, n_head);
  be.qkv_split_rope_forward(q.get(), k.get(), v.get(), d_qkv->get(), B, T, H, Dh);
  std::vector<float> eq(n_head), ek(n_head), ev(n_head);
  cpu().qkv_split_rope_forward(eq.data(), ek.data(), ev.data(), qkv.data(), B, T, H, Dh);
  expect_close(download(be, q.get(), n_head), eq, kHalfRtol, kHalfAtol, "q");
  expect_close(download(be, k.get(), n_head), ek, kHalfRtol, kHalfAtol, "k");
  EXPECT_EQ(download(be, v.get(), n_head), ev);

  // Backward with dq, dk, dv taken from the rounded q, k, v of the CPU.
  const auto dq = rounded_to_half(eq), dk = rounded_to_half(ek), dv = rounded_to_half(ev);
  auto d_dq = upload_half(be, dq), d_dk = upload_half(be, dk), d_dv = upload_half(be, dv);
  be.qkv_split_rope_backward(d_qkv->get(), d_dq->get(), d_dk->get(), d_dv->get(), B, T, H, Dh);
  std::vector<float> expected_dqkv(n_qkv);
  cpu().qkv_split_rope_backward(expected_dqkv.data(), dq.data(), dk.data(), dv.data(), B, T, H, Dh);
  expect_close(download(be, d_qkv->get(), n_qkv), expected_dqkv, kHalfRtol, kHalfAtol, "dqkv");

  cuda_test::DeviceArray<__half> merged(be, n_head), unmerged(be, n_head);
  be.merge_heads_forward(merged.get(), q.get(), B, T, H, Dh);
  be.merge_heads_backward(unmerged.get(), merged.get(), B, T, H, Dh);
  const std::vector<float> q_values = download(be, q.get(), n_head);
  std::vector<float> expected_merged(n_head);
  cpu().merge_heads_forward(expected_merged.data(), q_values.data(), B, T, H, Dh);
  EXPECT_EQ(download(be, merged.get(), n_head), expected_merged);
  EXPECT_EQ(download(be, unmerged.get(), n_head), q_values);

  const size_t n_scores = size_t(B) * H * T * T;
  const int32_t lengths[B] = {T, 3, 0};
  const auto scores = half_values(n_scores, 71, -8.0f, 8.0f), dprobs = half_values(n_scores, 72);
  auto d_scores = upload_half(be, scores), d_dprobs = upload_half(be, dprobs);
  cuda_test::DeviceArray<__half> probs(be, n_scores), dscores(be, n_scores);
  be.masked_softmax_forward(probs.get(), d_scores->get(), lengths, B, H, T);
  std::vector<float> expected_probs(n_scores);
  cpu().masked_softmax_forward(expected_probs.data(), scores.data(), lengths, B, H, T);
  const std::vector<float> got_probs = download(be, probs.get(), n_scores);
  expect_close(got_probs, expected_probs, kHalfRtol, 1e-4, "probs");
  // Backward from the GPU's own probabilities, on both backends.
  const std::vector<float> probs_used = got_probs;
  be.masked_softmax_backward(dscores.get(), d_dprobs->get(), probs.get(), B, H, T);
  std::vector<float> expected_dscores(n_scores);
  cpu().masked_softmax_backward(expected_dscores.data(), dprobs.data(), probs_used.data(), B, H, T);
  expect_close(download(be, dscores.get(), n_scores), expected_dscores, kHalfRtol, 1e-4, "dscores");
}

TEST(CudaDepthwiseConv1d, MaskedForwardAndBackwardMatchCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  for (int K : {5, 31}) {
    const int B = 4, T = 40, C = 24;
    const int32_t lengths[B] = {40, 17, 1, 0};
    const size_t n = size_t(B) * T * C, n_w = size_t(C) * K;
    const auto inp = half_values(n, 80), w = half_values(n_w, 81),
               bias = half_values(size_t(C), 82);
    const auto dout = half_values(n, 83);
    const auto dw0 = random_floats(n_w, 84), db0 = random_floats(size_t(C), 85);
    auto d_inp = upload_half(be, inp), d_w = upload_half(be, w), d_bias = upload_half(be, bias);
    auto d_dout = upload_half(be, dout);
    auto d_dw = upload_float(be, dw0), d_db = upload_float(be, db0);
    cuda_test::DeviceArray<__half> out(be, n), dinp(be, n);
    const std::string what = "K " + std::to_string(K);

    be.depthwise_conv1d_forward(out.get(), d_inp->get(), d_w->get(), d_bias->get(), lengths, B, T,
                                C, K);
    std::vector<float> expected_out(n);
    cpu().depthwise_conv1d_forward(expected_out.data(), inp.data(), w.data(), bias.data(), lengths,
                                   B, T, C, K);
    expect_close(download(be, out.get(), n), expected_out, kHalfRtol, kHalfAtol, "out, " + what);

    be.depthwise_conv1d_backward(dinp.get(), d_dw->get(), d_db->get(), d_dout->get(), d_inp->get(),
                                 d_w->get(), lengths, B, T, C, K);
    std::vector<float> expected_dinp(n), expected_dw = dw0, expected_db = db0;
    cpu().depthwise_conv1d_backward(expected_dinp.data(), expected_dw.data(), expected_db.data(),
                                    dout.data(), inp.data(), w.data(), lengths, B, T, C, K);
    expect_close(download(be, dinp.get(), n), expected_dinp, kHalfRtol, kHalfAtol, "dinp, " + what);
    expect_close(download(be, d_dw->get(), n_w), expected_dw, kFloatRtol, 1e-4, "dweight, " + what);
    expect_close(download(be, d_db->get(), size_t(C)), expected_db, kFloatRtol, 1e-4,
                 "dbias, " + what);
  }
}

TEST(CudaLogSoftmax, MatchesCpuInFloat) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  for (int V : {33, 1000}) {
    const int N = 20;
    const size_t n = size_t(N) * V;
    const auto logits = half_values(n, 90, -10.0f, 10.0f);
    auto d_logits = upload_half(be, logits);
    cuda_test::DeviceArray<float> logprobs(be, n);
    be.log_softmax_forward(logprobs.get(), d_logits->get(), N, V);
    std::vector<float> expected(n);
    cpu().log_softmax_forward(expected.data(), logits.data(), N, V);
    expect_close(download(be, logprobs.get(), n), expected, kFloatRtol, 1e-5,
                 "log_softmax V " + std::to_string(V));
  }
}

// Utterances: repeated labels, an infeasible one, an empty target, an empty
// input with an empty target, a long target, and padding frames.
TEST(CudaCtcLoss, LossesAndGradientsMatchCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  const int T = 60, V = 12;
  const std::vector<std::vector<int32_t>> ys = {
      {3, 3, 5, 1}, {2, 2, 2, 2, 2}, {}, {}, {4, 7, 4, 7, 1, 2, 3, 11, 9, 9, 8}, {1, 2, 3}};
  const std::vector<int32_t> input_lengths = {60, 6, 33, 0, 41, 2};
  const int B = int(ys.size());
  std::vector<int32_t> targets, target_lengths;
  for (const auto& y : ys) {
    targets.insert(targets.end(), y.begin(), y.end());
    target_lengths.push_back(int32_t(y.size()));
  }
  std::vector<double> grad_scale = {0.5, 1.0, 2.0, 1.0, 0.25, 1.0};

  // Log-probs from the log-softmax of random logits (as in training).
  const size_t n = size_t(B) * T * V;
  std::vector<float> logprobs(n);
  cpu().log_softmax_forward(logprobs.data(), random_floats(n, 100, -5.0f, 5.0f).data(), B * T, V);
  auto d_logprobs = upload_float(be, logprobs);
  cuda_test::DeviceArray<__half> dlogits(be, n);
  cuda_test::DeviceArray<double> d_losses(be, size_t(B)), d_loss_sum(be, 1);
  // The loss scale and the loss sum live on the device (the step control).
  const float loss_scale = 4.0f;
  const double sum_before = 0.5;
  auto d_loss_scale = upload_float(be, {loss_scale});
  be.to_device(d_loss_sum.get(), &sum_before, sizeof sum_before);
  grad_scale[2] = 0.0;  // left out of the sum
  std::vector<double> losses(B), expected_losses(B);
  be.ctc_loss(d_losses.get(), dlogits.get(), d_logprobs->get(), targets.data(),
              target_lengths.data(), input_lengths.data(), grad_scale.data(), d_loss_scale->get(),
              d_loss_sum.get(), B, T, V);
  be.to_host(losses.data(), d_losses.get(), losses.size() * sizeof(double));
  std::vector<float> expected_grad(n);
  double expected_sum = sum_before;
  cpu().ctc_loss(expected_losses.data(), expected_grad.data(), logprobs.data(), targets.data(),
                 target_lengths.data(), input_lengths.data(), grad_scale.data(), &loss_scale,
                 &expected_sum, B, T, V);
  double loss_sum = 0.0;
  be.to_host(&loss_sum, d_loss_sum.get(), sizeof loss_sum);
  EXPECT_TRUE(std::isinf(expected_sum)) << "utterance 1 is infeasible and kept";
  EXPECT_EQ(loss_sum, expected_sum);
  for (int b = 0; b < B; ++b) {
    if (std::isinf(expected_losses[size_t(b)])) {
      EXPECT_TRUE(std::isinf(losses[size_t(b)])) << "utterance " << b;
    } else {
      EXPECT_NEAR(losses[size_t(b)], expected_losses[size_t(b)],
                  1e-9 * std::max(1.0, std::abs(expected_losses[size_t(b)])))
          << "utterance " << b;
    }
  }
  EXPECT_TRUE(std::isinf(losses[1]));  // five 2s need nine frames, six given
  EXPECT_EQ(losses[3], 0.0);
  expect_close(download(be, dlogits.get(), n), expected_grad, kHalfRtol, 1e-4, "dlogits");

  // Loss only; the feasible utterances' sum.
  std::vector<double> losses_only(B);
  be.to_device(d_loss_sum.get(), &sum_before, sizeof sum_before);
  std::vector<double> feasible_scale(size_t(B), 1.0);
  feasible_scale[1] = 0.0;
  be.ctc_loss(d_losses.get(), nullptr, d_logprobs->get(), targets.data(), target_lengths.data(),
              input_lengths.data(), nullptr, nullptr, nullptr, B, T, V);
  be.to_host(losses_only.data(), d_losses.get(), losses_only.size() * sizeof(double));
  EXPECT_EQ(losses_only, losses);
  be.ctc_loss(d_losses.get(), dlogits.get(), d_logprobs->get(), targets.data(),
              target_lengths.data(), input_lengths.data(), feasible_scale.data(), nullptr,
              d_loss_sum.get(), B, T, V);
  be.to_host(&loss_sum, d_loss_sum.get(), sizeof loss_sum);
  double feasible_sum = sum_before;
  for (int b = 0; b < B; ++b) feasible_sum += b == 1 ? 0.0 : losses[size_t(b)];
  EXPECT_EQ(loss_sum, feasible_sum);

  const int32_t blank_target[1] = {0}, one = 1, four = 4;
  EXPECT_THROW(be.ctc_loss(d_losses.get(), nullptr, d_logprobs->get(), blank_target, &one, &four,
                           nullptr, nullptr, nullptr, 1, T, V),
               Error);
  const int32_t long_input = T + 1;
  EXPECT_THROW(be.ctc_loss(d_losses.get(), nullptr, d_logprobs->get(), targets.data(), &one,
                           &long_input, nullptr, nullptr, nullptr, 1, T, V),
               Error);
  EXPECT_GT(cuda_ctc_max_target_length(), 1000);
}

// The step's optimizer work on the device: the sum of squares added to the
// control (non-finite when a gradient is), the decision (kernels/step_control.h, against the CPU
// backend's), AdamW from the decided coefficients in one launch over segments laid out as a sharded
// optimizer's (moments compact, weights with holes, two decays), against the CPU backend's loop
// over the segments; the holes untouched, nothing on a skipped step.
TEST(CudaOptimizer, SumSquaresDecisionAndAdamW) {
  MPIASR_SKIP_WITHOUT_CUDA();
  CudaBackend& be = backend();
  // More elements than the reduction's 1024 x 256 threads, some taking two.
  const size_t n = cuda_test::kEmulated ? 300007 : 1000003;
  std::vector<float> g = random_floats(n, 110);
  auto d_g = upload_float(be, g);
  double expected = 0.0;
  for (float v : g) expected += double(v) * double(v);
  cuda_test::DeviceArray<StepControl> d_control(be, 1);
  StepControl control;
  control.grad_sum_squares = 2.0;
  be.to_device(d_control.get(), &control, sizeof control);
  be.add_sum_squares(&d_control.get()->grad_sum_squares, d_g->get(), n);
  be.add_sum_squares(&d_control.get()->grad_sum_squares, d_g->get(), 0);
  be.to_host(&control, d_control.get(), sizeof control);
  EXPECT_NEAR(control.grad_sum_squares, 2.0 + expected, 1e-12 * expected);
  // A NaN or an infinity anywhere makes the sum non-finite, so the decision skips.
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY}) {
    std::vector<float> with_bad = g;
    with_bad[n - 2] = bad;
    auto d_bad = upload_float(be, with_bad);
    StepControl fresh;
    be.to_device(d_control.get(), &fresh, sizeof fresh);
    be.add_sum_squares(&d_control.get()->grad_sum_squares, d_bad->get(), n);
    be.to_host(&fresh, d_control.get(), sizeof fresh);
    EXPECT_FALSE(std::isfinite(fresh.grad_sum_squares)) << bad;
  }

  const size_t m = 5000, state = 4000;
  const std::vector<AdamWSegment> segments = {{0, 1000, 0, 1e-3f},
                                              {1500, 1000, 1000, 0.0f},
                                              {2500, 1000, 2000, 1e-3f},
                                              {3990, 1000, 3000, 0.0f}};
  cuda_test::DeviceArray<AdamWSegment> d_segments(be, segments.size());
  be.to_device(d_segments.get(), segments.data(), segments.size() * sizeof(AdamWSegment));
  std::vector<float> w = random_floats(m, 111), mom = random_floats(state, 112, 0.0f, 0.1f);
  std::vector<float> vel = random_floats(state, 113, 0.0f, 0.01f);
  auto d_w = upload_float(be, w), d_m = upload_float(be, mom), d_v = upload_float(be, vel);
  auto d_grad = upload_float(be, std::vector<float>(g.begin(), g.begin() + m));
  cuda_test::DeviceArray<__half> w_half(be, m);
  be.zero(w_half.get(), m * sizeof(__half));
  std::vector<float> ew = w, em = mom, ev = vel;
  // Loss scale 2 with the scaler on, clipping at 1: each step is decided on
  // the device and on the host from the same sum, which must agree.
  StepRule rule;
  rule.scaler.enabled = 1;
  rule.clip_norm = 1.0;
  StepControl host;
  host.scaler.scale = 2.0f;
  host.lr = 1e-3f;
  host.loss_divisor = 3.0;
  be.to_device(d_control.get(), &host, sizeof host);
  const AdamWHyper hyper{0.9f, 0.98f, 1e-9f};
  const double sums[] = {4.0, 0.25, INFINITY, 9.0};
  for (double sum : sums) {
    host.grad_sum_squares = sum;
    be.to_device(&d_control.get()->grad_sum_squares, &sum, sizeof sum);
    be.decide_step(d_control.get(), rule);
    cpu().decide_step(&host, rule);
    be.adamw_step(d_w->get(), w_half.get(), d_grad->get(), d_m->get(), d_v->get(), d_segments.get(),
                  int(segments.size()), state, hyper, d_control.get());
    cpu().adamw_step(ew.data(), nullptr, g.data(), em.data(), ev.data(), segments.data(),
                     int(segments.size()), state, hyper, &host);
  }
  be.to_host(&control, d_control.get(), sizeof control);
  EXPECT_EQ(control.optimizer_step, 3);
  EXPECT_EQ(control.skipped, 1);
  EXPECT_EQ(control.scaler.scale, 1.0f) << "halved at the non-finite step";
  EXPECT_NEAR(control.grad_scale, host.grad_scale, 1e-7 * host.grad_scale);
  EXPECT_NEAR(control.grad_norm, host.grad_norm, 1e-12 * host.grad_norm);
  EXPECT_NEAR(control.bias_correction2, host.bias_correction2, 1e-15);
  const std::vector<float> got_w = download(be, d_w->get(), m);
  expect_close(got_w, ew, kFloatRtol, 1e-6, "w");
  expect_close(download(be, d_m->get(), state), em, kFloatRtol, 1e-7, "m");
  expect_close(download(be, d_v->get(), state), ev, kFloatRtol, 1e-8, "v");
  for (size_t i : {size_t(1000), size_t(1499), size_t(3500), size_t(3989)}) {
    EXPECT_EQ(got_w[i], w[i]) << "element " << i << " lies in no segment";
  }
  const std::vector<float> got_half = download(be, w_half.get(), m);
  const std::vector<float> expected_half = rounded_to_half(got_w);
  for (const AdamWSegment& segment : segments) {
    for (size_t i = segment.offset; i < segment.offset + segment.count; ++i) {
      ASSERT_EQ(got_half[i], expected_half[i]) << "element " << i;
    }
  }
  EXPECT_EQ(got_half[1200], 0.0f) << "the half copy is written in the segments only";
}

}  // namespace
}  // namespace mpiasr
