// Every CudaBackend operation against the CPU backend (CpuBackend<float>) on
// random inputs that are first rounded to the activation type, so both
// backends see the same values; every test runs for fp16 and bf16 (typed
// suites, /fp16 and /bf16). Skipped without a CUDA device; in the emulation
// build they run on the CPU (kernels/cuda_emu), as ctest's emu.* entries.
//
// Tolerances (|gpu - cpu| <= atol + rtol |cpu|):
//   16-bit outputs        kActRtol / kActAtol (cuda_test_util.h): four unit
//                         roundoffs of the type, one rounding plus float
//                         differences in the order of operations
//   float outputs         (weight gradients, statistics, log-probs, AdamW)
//                         rtol 1e-4 / atol 1e-5: fp32 accumulation in another order
//   exact                 casts, copies, masks, dropout's pattern of zeros
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/ctc_loss.h"
#include "kernels/philox.h"
#include "tests/cuda/cuda_test_util.h"

namespace mpiasr {
namespace {

using cuda_test::backend;
using cuda_test::download;
using cuda_test::expect_close;
using cuda_test::kActAtol;
using cuda_test::kActRtol;
using cuda_test::random_floats;
using cuda_test::rounded;
using cuda_test::upload;
using cuda_test::upload_float;

constexpr double kFloatRtol = 1e-4, kFloatAtol = 1e-5;

MPIASR_CUDA_TYPED_SUITE(CudaCasts);
MPIASR_CUDA_TYPED_SUITE(CudaInput);
MPIASR_CUDA_TYPED_SUITE(CudaElementwise);
MPIASR_CUDA_TYPED_SUITE(CudaLinear);
MPIASR_CUDA_TYPED_SUITE(CudaConv2d);
MPIASR_CUDA_TYPED_SUITE(CudaLayerNorm);
MPIASR_CUDA_TYPED_SUITE(CudaActivations);
MPIASR_CUDA_TYPED_SUITE(CudaDropout);
MPIASR_CUDA_TYPED_SUITE(CudaAttention);
MPIASR_CUDA_TYPED_SUITE(CudaDepthwiseConv1d);
MPIASR_CUDA_TYPED_SUITE(CudaLogSoftmax);
MPIASR_CUDA_TYPED_SUITE(CudaCtcLoss);
MPIASR_CUDA_TYPED_SUITE(CudaOptimizer);

CpuBackend<float>& cpu() {
  static CpuBackend<float> instance(1);
  return instance;
}

// Random values rounded to Act.
template <typename Act>
std::vector<float> act_values(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return rounded<Act>(random_floats(n, seed, lo, hi));
}

TYPED_TEST(CudaCasts, MatchHostConversionsExactly) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  std::vector<float> x = random_floats(1000, 1, -70000.0f, 70000.0f);
  x.insert(x.end(), {0.0f, -0.0f, 1e-8f, 65504.0f, 65520.0f, 1e9f, -1e9f, 3.14159f});
  auto src = upload_float(be, x);
  cuda_test::DeviceArray<Act> half(be, x.size());
  cuda_test::DeviceArray<float> back(be, x.size());
  be.cast_f32_to_act(half.get(), src->get(), x.size());
  be.cast_act_to_acc(back.get(), half.get(), x.size());
  const std::vector<float> round_trip = download(be, back.get(), x.size());
  const std::vector<float> expected = rounded<Act>(x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(std::memcmp(&round_trip[i], &expected[i], sizeof(float)), 0)
        << x[i] << " -> " << round_trip[i] << ", expected " << expected[i];
  }
  be.cast_acc_to_act(half.get(), src->get(), x.size());
  EXPECT_EQ(download(be, half.get(), x.size()), round_trip);
  // From one element in: not 16-byte aligned, element by element.
  be.zero(half.get(), x.size() * sizeof(Act));
  be.zero(back.get(), x.size() * sizeof(float));
  be.cast_acc_to_act(half.get() + 1, src->get() + 1, x.size() - 1);
  be.cast_act_to_acc(back.get() + 1, half.get() + 1, x.size() - 1);
  std::vector<float> shifted = round_trip;
  shifted[0] = 0.0f;
  EXPECT_EQ(download(be, back.get(), x.size()), shifted);
}

// upload_input double-buffers the features: six batches uploaded with no
// host wait between, each cast on the compute stream right after its upload,
// keep their own values; an upload into a buffer waits for the cast that
// read it two uploads before (DESIGN.md, "A step without host
// synchronization"). On the emulator the copy stream and the compute stream
// interleave at random where no event orders them.
TYPED_TEST(CudaInput, UploadsInFlightKeepTheirValues) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  constexpr size_t n = 3000;  // more than a page of pinned memory
  std::vector<std::vector<float>> batches;
  std::vector<std::unique_ptr<cuda_test::DeviceArray<Act>>> casts;
  for (uint64_t batch = 0; batch < 6; ++batch) {
    batches.push_back(act_values<Act>(n, 100 + batch));
    casts.push_back(std::make_unique<cuda_test::DeviceArray<Act>>(be, n));
  }
  for (size_t batch = 0; batch < batches.size(); ++batch) {
    be.cast_f32_to_act(casts[batch]->get(), be.upload_input(batches[batch].data(), n), n);
  }
  for (size_t batch = 0; batch < batches.size(); ++batch) {
    EXPECT_EQ(download(be, casts[batch]->get(), n), batches[batch]) << "batch " << batch;
  }
}

TYPED_TEST(CudaElementwise, MaskPadding) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  for (int C : {5, 16}) {
    const int B = 3, T = 7;
    const size_t n = size_t(B) * T * C;
    const std::string what = "C " + std::to_string(C);
    const auto r = act_values<Act>(n, 3);
    auto dr = upload<Act>(be, r);
    const int32_t lengths[B] = {7, 2, 0};
    be.mask_padding(dr->get(), lengths, B, T, C);
    std::vector<float> masked = r;
    cpu().mask_padding(masked.data(), lengths, B, T, C);
    EXPECT_EQ(download(be, dr->get(), n), masked) << what;
    const int32_t too_long[B] = {8, 1, 1};
    EXPECT_THROW(be.mask_padding(dr->get(), too_long, B, T, C), Error);
  }
}

TYPED_TEST(CudaLinear, ForwardAndBackwardAccumulateLikeCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  const int M = 300, K = 48, N = 40;  // M > 32 rows: several column-sum chunks
  const auto inp = act_values<Act>(size_t(M) * K, 20), w = act_values<Act>(size_t(N) * K, 21);
  const auto bias = act_values<Act>(size_t(N), 22), dout = act_values<Act>(size_t(M) * N, 23);
  const auto dw0 = random_floats(size_t(N) * K, 24), db0 = random_floats(size_t(N), 25);
  auto d_inp = upload<Act>(be, inp), d_w = upload<Act>(be, w), d_bias = upload<Act>(be, bias);
  auto d_dout = upload<Act>(be, dout);
  auto d_dw = upload_float(be, dw0), d_db = upload_float(be, db0);
  cuda_test::DeviceArray<Act> out(be, size_t(M) * N), dinp(be, size_t(M) * K);

  be.linear_forward(out.get(), d_inp->get(), d_w->get(), d_bias->get(), M, K, N);
  std::vector<float> expected_out(size_t(M) * N);
  cpu().linear_forward(expected_out.data(), inp.data(), w.data(), bias.data(), M, K, N);
  expect_close(download(be, out.get(), out.size()), expected_out, kActRtol<Act>, kActAtol<Act>,
               "out");

  be.linear_forward(out.get(), d_inp->get(), d_w->get(), nullptr, M, K, N);
  cpu().linear_forward(expected_out.data(), inp.data(), w.data(), nullptr, M, K, N);
  expect_close(download(be, out.get(), out.size()), expected_out, kActRtol<Act>, kActAtol<Act>,
               "out without bias");

  be.linear_backward(dinp.get(), d_dw->get(), d_db->get(), d_dout->get(), d_inp->get(), d_w->get(),
                     M, K, N);
  std::vector<float> expected_dinp(size_t(M) * K), expected_dw = dw0, expected_db = db0;
  cpu().linear_backward(expected_dinp.data(), expected_dw.data(), expected_db.data(), dout.data(),
                        inp.data(), w.data(), M, K, N);
  expect_close(download(be, dinp.get(), dinp.size()), expected_dinp, kActRtol<Act>, kActAtol<Act>,
               "dinp");
  expect_close(download(be, d_dw->get(), dw0.size()), expected_dw, kFloatRtol, 1e-4, "dweight");
  expect_close(download(be, d_db->get(), db0.size()), expected_db, kFloatRtol, 1e-4, "dbias");
}

// Every operand 16 bytes past a 256-byte boundary (arena allocations start
// on one) with leading dimensions of 256 bytes: cuBLASLt may only pick
// algorithms that work at 16 bytes, if cuda_gemm tells its heuristic so.
TYPED_TEST(CudaLinear, OperandsAlignedTo16BytesOnlyMatchCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  const int M = 40, K = 128, N = 64;
  const size_t act_pad = 16 / sizeof(Act), float_pad = 16 / sizeof(float);
  const auto inp = act_values<Act>(size_t(M) * K, 40), w = act_values<Act>(size_t(N) * K, 41);
  const auto bias = act_values<Act>(size_t(N), 42), dout = act_values<Act>(size_t(M) * N, 43);
  const auto dw0 = random_floats(size_t(N) * K, 44), db0 = random_floats(size_t(N), 45);
  const auto padded = [](const std::vector<float>& x, size_t pad) {
    std::vector<float> out(pad, 0.0f);
    out.insert(out.end(), x.begin(), x.end());
    return out;
  };
  auto d_inp = upload<Act>(be, padded(inp, act_pad)), d_w = upload<Act>(be, padded(w, act_pad));
  auto d_bias = upload<Act>(be, padded(bias, act_pad));
  auto d_dout = upload<Act>(be, padded(dout, act_pad));
  auto d_dw = upload_float(be, padded(dw0, float_pad));
  auto d_db = upload_float(be, padded(db0, float_pad));
  cuda_test::DeviceArray<Act> out(be, act_pad + size_t(M) * N), dinp(be, act_pad + size_t(M) * K);
  Act* const out_at = out.get() + act_pad;
  Act* const dinp_at = dinp.get() + act_pad;
  const Act *inp_at = d_inp->get() + act_pad, *w_at = d_w->get() + act_pad;
  const Act *bias_at = d_bias->get() + act_pad, *dout_at = d_dout->get() + act_pad;
  float* const dw_at = d_dw->get() + float_pad;
  float* const db_at = d_db->get() + float_pad;

  be.linear_forward(out_at, inp_at, w_at, bias_at, M, K, N);
  std::vector<float> expected_out(size_t(M) * N);
  cpu().linear_forward(expected_out.data(), inp.data(), w.data(), bias.data(), M, K, N);
  expect_close(download(be, out_at, expected_out.size()), expected_out, kActRtol<Act>,
               kActAtol<Act>, "out");

  be.linear_backward(dinp_at, dw_at, db_at, dout_at, inp_at, w_at, M, K, N);
  std::vector<float> expected_dinp(size_t(M) * K), expected_dw = dw0, expected_db = db0;
  cpu().linear_backward(expected_dinp.data(), expected_dw.data(), expected_db.data(), dout.data(),
                        inp.data(), w.data(), M, K, N);
  expect_close(download(be, dinp_at, expected_dinp.size()), expected_dinp, kActRtol<Act>,
               kActAtol<Act>, "dinp");
  expect_close(download(be, dw_at, dw0.size()), expected_dw, kFloatRtol, 1e-4, "dweight");
  expect_close(download(be, db_at, db0.size()), expected_db, kFloatRtol, 1e-4, "dbias");
}

// With the default chunking (all images at once) and with one image per chunk.
// cuda_gemm's errors name its call site: here the emulated heuristic's, for
// a misspelt site in MPIASR_EMU_CUBLASLT_NO_ALGO, which lists every site
// cuda_gemm told it (kGemmSites). The shape is one no other test plans.
TEST(CudaGemmSite, ErrorsNameTheSite) {
  MPIASR_SKIP_WITHOUT_CUDA();
  if (!cuda_test::kEmulated) GTEST_SKIP() << "MPIASR_EMU_CUBLASLT_NO_ALGO is the emulator's";
  CudaBackend<__half>& be = backend<__half>();
  const int M = 7, K = 40, N = 24;
  auto inp = upload<__half>(be, act_values<__half>(size_t(M) * K, 50));
  auto w = upload<__half>(be, act_values<__half>(size_t(N) * K, 51));
  cuda_test::DeviceArray<__half> out(be, size_t(M) * N);
  ASSERT_EQ(setenv("MPIASR_EMU_CUBLASLT_NO_ALGO", "linear.forwrd", 1), 0);
  try {
    be.linear_forward(out.get(), inp->get(), w->get(), nullptr, M, K, N);
    ADD_FAILURE() << "a misspelt site was accepted";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind(
                  "cuda_gemm at linear.forward: MPIASR_EMU_CUBLASLT_NO_ALGO=linear.forwrd: ", 0),
              0u)
        << message;
    EXPECT_NE(message.find("linear.forward, linear.dinp, linear.dweight, conv2d.forward, "
                           "conv2d.dweight, conv2d.dinp"),
              std::string::npos)
        << message;
  }
  ASSERT_EQ(unsetenv("MPIASR_EMU_CUBLASLT_NO_ALGO"), 0);
}

TYPED_TEST(CudaConv2d, ForwardAndBackwardMatchCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act> one_image_chunks(
      CudaBackendOptions{.arena_bytes = cuda_test::kTestArenaBytes, .conv2d_column_budget = 1});
  for (CudaBackend<Act>* be : {&backend<Act>(), &one_image_chunks}) {
    for (int Cin : {1, 3, 16}) {
      const int B = 3, H = 13, W = 10, Cout = 8;
      const int Ho = (H - 3) / 2 + 1, Wo = (W - 3) / 2 + 1;
      const size_t n_in = size_t(B) * H * W * Cin, n_out = size_t(B) * Ho * Wo * Cout;
      const size_t n_w = size_t(Cout) * Cin * 9;
      const auto inp = act_values<Act>(n_in, 30), w = act_values<Act>(n_w, 31);
      const auto bias = act_values<Act>(size_t(Cout), 32), dout = act_values<Act>(n_out, 33);
      const auto dw0 = random_floats(n_w, 34), db0 = random_floats(size_t(Cout), 35);
      auto d_inp = upload<Act>(*be, inp), d_w = upload<Act>(*be, w);
      auto d_bias = upload<Act>(*be, bias), d_dout = upload<Act>(*be, dout);
      auto d_dw = upload_float(*be, dw0), d_db = upload_float(*be, db0);
      cuda_test::DeviceArray<Act> out(*be, n_out), dinp(*be, n_in);
      const std::string what = "Cin " + std::to_string(Cin) +
                               (be == &backend<Act>() ? ", one chunk" : ", one image per chunk");

      std::vector<float> expected_out(n_out);
      for (bool relu : {true, false}) {
        be->conv2d_forward(out.get(), d_inp->get(), d_w->get(), d_bias->get(), B, Cin, H, W, Cout,
                           relu);
        cpu().conv2d_forward(expected_out.data(), inp.data(), w.data(), bias.data(), B, Cin, H, W,
                             Cout, relu);
        expect_close(download(*be, out.get(), n_out), expected_out, kActRtol<Act>, kActAtol<Act>,
                     "conv2d out, " + what + (relu ? ", relu" : ""));
      }

      be->conv2d_backward(dinp.get(), d_dw->get(), d_db->get(), d_dout->get(), d_inp->get(),
                          d_w->get(), B, Cin, H, W, Cout);
      std::vector<float> expected_dinp(n_in), expected_dw = dw0, expected_db = db0;
      cpu().conv2d_backward(expected_dinp.data(), expected_dw.data(), expected_db.data(),
                            dout.data(), inp.data(), w.data(), B, Cin, H, W, Cout);
      expect_close(download(*be, dinp.get(), n_in), expected_dinp, kActRtol<Act>, kActAtol<Act>,
                   "conv2d dinp, " + what);
      expect_close(download(*be, d_dw->get(), n_w), expected_dw, kFloatRtol, 1e-4,
                   "conv2d dweight, " + what);
      expect_close(download(*be, d_db->get(), size_t(Cout)), expected_db, kFloatRtol, 1e-4,
                   "conv2d dbias, " + what);
    }
  }
}

TYPED_TEST(CudaLayerNorm, ForwardStatisticsAndBackward) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  for (int C : {24, 256, 300}) {
    const int N = 150;
    const size_t n = size_t(N) * C;
    const auto inp = act_values<Act>(n, 40, -2.0f, 3.0f), w = act_values<Act>(size_t(C), 41);
    const auto bias = act_values<Act>(size_t(C), 42), dout = act_values<Act>(n, 43);
    const auto dinp0 = act_values<Act>(n, 44);
    const auto dw0 = random_floats(size_t(C), 45), db0 = random_floats(size_t(C), 46);
    auto d_inp = upload<Act>(be, inp), d_w = upload<Act>(be, w), d_bias = upload<Act>(be, bias);
    auto d_dout = upload<Act>(be, dout), d_dinp = upload<Act>(be, dinp0);
    auto d_dw = upload_float(be, dw0), d_db = upload_float(be, db0);
    cuda_test::DeviceArray<Act> out(be, n);
    cuda_test::DeviceArray<float> mean(be, size_t(N)), rstd(be, size_t(N));
    const std::string what = "C " + std::to_string(C);

    be.layernorm_forward(out.get(), mean.get(), rstd.get(), d_inp->get(), d_w->get(), d_bias->get(),
                         N, C, 1e-5f);
    std::vector<float> expected_out(n), expected_mean(N), expected_rstd(N);
    cpu().layernorm_forward(expected_out.data(), expected_mean.data(), expected_rstd.data(),
                            inp.data(), w.data(), bias.data(), N, C, 1e-5f);
    expect_close(download(be, out.get(), n), expected_out, kActRtol<Act>, kActAtol<Act>,
                 "out, " + what);
    expect_close(download(be, mean.get(), size_t(N)), expected_mean, kFloatRtol, kFloatAtol,
                 "mean, " + what);
    expect_close(download(be, rstd.get(), size_t(N)), expected_rstd, kFloatRtol, kFloatAtol,
                 "rstd, " + what);

    be.layernorm_backward(d_dinp->get(), d_dw->get(), d_db->get(), d_dout->get(), d_inp->get(),
                          d_w->get(), mean.get(), rstd.get(), N, C, true);
    std::vector<float> expected_dinp = dinp0, expected_dw = dw0, expected_db = db0;
    cpu().layernorm_backward(expected_dinp.data(), expected_dw.data(), expected_db.data(),
                             dout.data(), inp.data(), w.data(), expected_mean.data(),
                             expected_rstd.data(), N, C, true);
    expect_close(download(be, d_dinp->get(), n), expected_dinp, kActRtol<Act>, kActAtol<Act>,
                 "dinp, " + what);
    // Written instead of accumulated: dinp0 is overwritten.
    be.layernorm_backward(d_dinp->get(), nullptr, nullptr, d_dout->get(), d_inp->get(), d_w->get(),
                          mean.get(), rstd.get(), N, C, false);
    cpu().layernorm_backward(expected_dinp.data(), nullptr, nullptr, dout.data(), inp.data(),
                             w.data(), expected_mean.data(), expected_rstd.data(), N, C, false);
    expect_close(download(be, d_dinp->get(), n), expected_dinp, kActRtol<Act>, kActAtol<Act>,
                 "written dinp, " + what);
    expect_close(download(be, d_dw->get(), size_t(C)), expected_dw, kFloatRtol, 1e-4,
                 "dweight, " + what);
    expect_close(download(be, d_db->get(), size_t(C)), expected_db, kFloatRtol, 1e-4,
                 "dbias, " + what);
  }
}

// The residual sum before LayerNorm (with dropout, at a dropout offset on and
// off the 8-element Philox blocks) and the Swish after it; C = 24 and 256
// make whole 128-bit packs, C = 300 does not. The GPU normalizes x as rounded
// to the activation type, so the CPU reference normalizes that rounded x; the
// Swish backward reads the same LN(x) on both.
TYPED_TEST(CudaLayerNorm, ResidualAndSwishFormsMatchCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  for (int C : {24, 256, 300}) {
    for (uint64_t offset : {uint64_t(16), uint64_t(13)}) {
      const int N = 150;
      const size_t n = size_t(N) * C;
      const std::string what = "C " + std::to_string(C) + ", offset " + std::to_string(offset);
      const auto base = act_values<Act>(n, 47, -2.0f, 3.0f), branch = act_values<Act>(n, 48);
      const auto w = act_values<Act>(size_t(C), 41), bias = act_values<Act>(size_t(C), 42);
      const auto dout = act_values<Act>(n, 43);
      const auto dw0 = random_floats(size_t(C), 45), db0 = random_floats(size_t(C), 46);
      auto d_base = upload<Act>(be, base), d_branch = upload<Act>(be, branch);
      auto d_w = upload<Act>(be, w), d_bias = upload<Act>(be, bias), d_dout = upload<Act>(be, dout);
      auto d_dw = upload_float(be, dw0), d_db = upload_float(be, db0);
      cuda_test::DeviceArray<Act> x(be, n), out(be, n), swished(be, n), dinp(be, n);
      cuda_test::DeviceArray<float> mean(be, size_t(N)), rstd(be, size_t(N));

      be.residual_layernorm_forward(x.get(), out.get(), mean.get(), rstd.get(), d_base->get(),
                                    d_branch->get(), 0.5f, 0.2f, 77, offset, d_w->get(),
                                    d_bias->get(), N, C, 1e-5f);
      std::vector<float> expected_x(n), expected_out(n), expected_mean(N), expected_rstd(N);
      cpu().residual_layernorm_forward(expected_x.data(), expected_out.data(), expected_mean.data(),
                                       expected_rstd.data(), base.data(), branch.data(), 0.5f, 0.2f,
                                       77, offset, w.data(), bias.data(), N, C, 1e-5f);
      const std::vector<float> got_x = download(be, x.get(), n);
      expect_close(got_x, expected_x, kActRtol<Act>, kActAtol<Act>, "residual x, " + what);
      for (size_t i = 0; i < n; ++i) {  // the dropped elements are base itself
        if (!dropout_keep(77, offset + i, 0.2f)) {
          ASSERT_EQ(got_x[i], base[i]) << i << ", " << what;
        }
      }
      const std::vector<float> x_rounded = rounded<Act>(expected_x);
      cpu().layernorm_forward(expected_out.data(), expected_mean.data(), expected_rstd.data(),
                              x_rounded.data(), w.data(), bias.data(), N, C, 1e-5f);
      expect_close(download(be, out.get(), n), expected_out, kActRtol<Act>, kActAtol<Act>,
                   "residual LN, " + what);
      expect_close(download(be, mean.get(), size_t(N)), expected_mean, kFloatRtol, kFloatAtol,
                   "residual mean, " + what);
      expect_close(download(be, rstd.get(), size_t(N)), expected_rstd, kFloatRtol, kFloatAtol,
                   "residual rstd, " + what);

      // LN then Swish on the base.
      be.layernorm_swish_forward(out.get(), swished.get(), mean.get(), rstd.get(), d_base->get(),
                                 d_w->get(), d_bias->get(), N, C, 1e-5f);
      std::vector<float> expected_swished(n);
      cpu().layernorm_swish_forward(expected_out.data(), expected_swished.data(),
                                    expected_mean.data(), expected_rstd.data(), base.data(),
                                    w.data(), bias.data(), N, C, 1e-5f);
      const std::vector<float> normed = download(be, out.get(), n);
      expect_close(normed, expected_out, kActRtol<Act>, kActAtol<Act>, "LN of swish, " + what);
      expect_close(download(be, swished.get(), n), expected_swished, kActRtol<Act>, kActAtol<Act>,
                   "swish of LN, " + what);

      be.layernorm_swish_backward(dinp.get(), d_dw->get(), d_db->get(), d_dout->get(),
                                  d_base->get(), out.get(), d_w->get(), mean.get(), rstd.get(), N,
                                  C);
      std::vector<float> expected_dinp(n), expected_dw = dw0, expected_db = db0;
      cpu().layernorm_swish_backward(expected_dinp.data(), expected_dw.data(), expected_db.data(),
                                     dout.data(), base.data(), normed.data(), w.data(),
                                     expected_mean.data(), expected_rstd.data(), N, C);
      expect_close(download(be, dinp.get(), n), expected_dinp, kActRtol<Act>, kActAtol<Act>,
                   "swish LN dinp, " + what);
      expect_close(download(be, d_dw->get(), size_t(C)), expected_dw, kFloatRtol, 1e-4,
                   "swish LN dweight, " + what);
      expect_close(download(be, d_db->get(), size_t(C)), expected_db, kFloatRtol, 1e-4,
                   "swish LN dbias, " + what);
    }
  }
}

// n = 64 x 80 makes whole 128-bit packs; 64 x 26 does not; the dropout
// offset 13 keeps packs off the Philox blocks.
TYPED_TEST(CudaActivations, ReluAndSwishForwardAndBackward) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  for (int C : {40, 13}) {
    const int N = 64;
    const size_t n = size_t(N) * 2 * C;
    const std::string what = ", C " + std::to_string(C);
    const auto x = act_values<Act>(n, 50, -6.0f, 6.0f), dy = act_values<Act>(n, 51);
    auto d_x = upload<Act>(be, x), d_dy = upload<Act>(be, dy);
    cuda_test::DeviceArray<Act> out(be, n);
    std::vector<float> expected(n);

    be.relu_backward(out.get(), d_dy->get(), d_x->get(), n);
    cpu().relu_backward(expected.data(), dy.data(), x.data(), n);
    EXPECT_EQ(download(be, out.get(), n), expected) << what;

    for (float p : {0.0f, 0.3f}) {
      for (uint64_t offset : {uint64_t(0), uint64_t(13)}) {
        const std::string site =
            what + ", p " + std::to_string(p) + ", offset " + std::to_string(offset);
        be.swish_dropout_forward(out.get(), d_x->get(), p, 99, offset, n);
        cpu().swish_dropout_forward(expected.data(), x.data(), p, 99, offset, n);
        std::vector<float> got = download(be, out.get(), n);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(got[i] == 0.0f, expected[i] == 0.0f) << i << site;
        }
        expect_close(got, expected, kActRtol<Act>, kActAtol<Act>, "swish" + site);
        be.swish_dropout_backward(out.get(), d_dy->get(), d_x->get(), p, 99, offset, n);
        cpu().swish_dropout_backward(expected.data(), dy.data(), x.data(), p, 99, offset, n);
        expect_close(download(be, out.get(), n), expected, kActRtol<Act>, kActAtol<Act>,
                     "swish backward" + site);
      }
    }
  }
}

// The same elements are dropped as on the CPU, bit for bit, at any offset
// (on and off the Philox blocks, and past 2^40), through the gradient of a
// residual branch, scale 1 and 1/2, in place too.
TYPED_TEST(CudaDropout, MaskIdenticalToCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  const size_t n = 10008;
  const auto x = act_values<Act>(n, 60);
  for (uint64_t offset : {uint64_t(0), uint64_t(13), (uint64_t(5) << 40) + 3}) {
    for (float scale : {1.0f, 0.5f}) {
      auto d_x = upload<Act>(be, x);
      cuda_test::DeviceArray<Act> out(be, n);
      be.residual_dropout_backward(out.get(), d_x->get(), scale, 0.3f, 1234, offset, n);
      std::vector<float> expected(n);
      cpu().residual_dropout_backward(expected.data(), x.data(), scale, 0.3f, 1234, offset, n);
      const std::vector<float> got = download(be, out.get(), n);
      size_t dropped = 0;
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(got[i] == 0.0f, expected[i] == 0.0f) << "element " << i << " offset " << offset;
        dropped += expected[i] == 0.0f;
      }
      EXPECT_NEAR(double(dropped) / n, 0.3, 0.02);
      expect_close(got, expected, kActRtol<Act>, kActAtol<Act>, "dropout values");
      // In place: the same values.
      be.residual_dropout_backward(d_x->get(), d_x->get(), scale, 0.3f, 1234, offset, n);
      EXPECT_EQ(download(be, d_x->get(), n), got);
    }
  }
  auto d_x = upload<Act>(be, x);
  cuda_test::DeviceArray<Act> out(be, n);
  be.residual_dropout_backward(out.get(), d_x->get(), 1.0f, 0.0f, 1, 0, n);
  EXPECT_EQ(download(be, out.get(), n), x);
  be.residual_dropout_backward(out.get(), d_x->get(), 1.0f, 1.0f, 1, 0, n);
  EXPECT_EQ(download(be, out.get(), n), std::vector<float>(n, 0.0f));
  EXPECT_THROW(be.residual_dropout_backward(out.get(), d_x->get(), 1.0f, 1.5f, 1, 0, n), Error);
}

// Fused attention against the CPU backend's for the head sizes of the presets
// (16 tiny, 36 small, 64 medium and large) and the largest (128), T a
// multiple of no tile, and lengths T, partial, 1 and 0.
TYPED_TEST(CudaAttention, ForwardAndBackwardMatchCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  for (int Dh : {16, 36, 64, 128}) {
    const int B = 4, T = 50, H = 2;
    const int32_t lengths[B] = {T, 37, 1, 0};
    const size_t n_qkv = size_t(B) * T * 3 * H * Dh, n = size_t(B) * T * H * Dh;
    const size_t n_lse = size_t(B) * H * T;
    const float scale = float(1.0 / std::sqrt(double(Dh)));
    const std::string what = "Dh " + std::to_string(Dh);
    const auto qkv = act_values<Act>(n_qkv, 120, -2.0f, 2.0f), dout = act_values<Act>(n, 121);
    auto d_qkv = upload<Act>(be, qkv), d_dout = upload<Act>(be, dout);
    cuda_test::DeviceArray<Act> out(be, n), dqkv(be, n_qkv);
    cuda_test::DeviceArray<float> lse(be, n_lse);

    be.attention_forward(out.get(), lse.get(), d_qkv->get(), lengths, B, T, H, Dh, scale);
    std::vector<float> expected_out(n), expected_lse(n_lse);
    cpu().attention_forward(expected_out.data(), expected_lse.data(), qkv.data(), lengths, B, T, H,
                            Dh, scale);
    const std::vector<float> got_out = download(be, out.get(), n);
    expect_close(got_out, expected_out, kActRtol<Act>, kActAtol<Act>, "out, " + what);
    const std::vector<float> got_lse = download(be, lse.get(), n_lse);
    for (size_t i = 0; i < n_lse; ++i) {
      if (std::isinf(expected_lse[i])) {
        EXPECT_EQ(got_lse[i], expected_lse[i]) << "lse " << i << ", " << what;
      } else {
        EXPECT_NEAR(got_lse[i], expected_lse[i],
                    4 * kActAtol<Act> * (1 + std::abs(expected_lse[i])))
            << "lse " << i << ", " << what;
      }
    }

    be.attention_backward(dqkv.get(), d_dout->get(), out.get(), lse.get(), d_qkv->get(), lengths, B,
                          T, H, Dh, scale);
    std::vector<float> expected_dqkv(n_qkv);
    cpu().attention_backward(expected_dqkv.data(), dout.data(), expected_out.data(),
                             expected_lse.data(), qkv.data(), lengths, B, T, H, Dh, scale);
    const std::vector<float> got_dqkv = download(be, dqkv.get(), n_qkv);
    expect_close(got_dqkv, expected_dqkv, kActRtol<Act>, 2 * kActAtol<Act>, "dqkv, " + what);
  }
}

// The GLU and depthwise convolution against the CPU backend's: kernel sizes 5
// and 31 with lengths T, partial, 1 and 0, and 2 x 2100 frames (kernel size
// 5), where each block of the weight gradient sums 66 rows (B T over 64
// chunks), so it loads a second tile of rows (the kernel's tiles hold 64)
// into shared memory after the first.
TYPED_TEST(CudaDepthwiseConv1d, GluThenMaskedConvolutionForwardAndBackwardMatchCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  struct Shape {
    int B, T, K;
    std::vector<int32_t> lengths;
  };
  const Shape shapes[] = {
      {4, 40, 5, {40, 17, 1, 0}}, {4, 40, 31, {40, 17, 1, 0}}, {2, 2100, 5, {2100, 1333}}};
  const int chunks = column_chunks(2 * 2100);
  ASSERT_GT((2 * 2100 + chunks - 1) / chunks, 64) << "one tile of rows per block";
  for (const Shape& shape : shapes) {
    const int B = shape.B, T = shape.T, K = shape.K, C = 24;
    const int32_t* lengths = shape.lengths.data();
    const size_t n = size_t(B) * T * C, n_inp = 2 * n, n_w = size_t(C) * K;
    const auto inp = act_values<Act>(n_inp, 80), w = act_values<Act>(n_w, 81),
               bias = act_values<Act>(size_t(C), 82);
    const auto dout = act_values<Act>(n, 83);
    const auto dw0 = random_floats(n_w, 84), db0 = random_floats(size_t(C), 85);
    auto d_inp = upload<Act>(be, inp), d_w = upload<Act>(be, w), d_bias = upload<Act>(be, bias);
    auto d_dout = upload<Act>(be, dout);
    auto d_dw = upload_float(be, dw0), d_db = upload_float(be, db0);
    cuda_test::DeviceArray<Act> out(be, n), dinp(be, n_inp);
    const std::string what =
        "B " + std::to_string(B) + ", T " + std::to_string(T) + ", K " + std::to_string(K);

    be.glu_depthwise_conv1d_forward(out.get(), d_inp->get(), d_w->get(), d_bias->get(), lengths, B,
                                    T, C, K);
    std::vector<float> expected_out(n);
    cpu().glu_depthwise_conv1d_forward(expected_out.data(), inp.data(), w.data(), bias.data(),
                                       lengths, B, T, C, K);
    expect_close(download(be, out.get(), n), expected_out, kActRtol<Act>, kActAtol<Act>,
                 "out, " + what);

    be.glu_depthwise_conv1d_backward(dinp.get(), d_dw->get(), d_db->get(), d_dout->get(),
                                     d_inp->get(), d_w->get(), lengths, B, T, C, K);
    std::vector<float> expected_dinp(n_inp), expected_dw = dw0, expected_db = db0;
    cpu().glu_depthwise_conv1d_backward(expected_dinp.data(), expected_dw.data(),
                                        expected_db.data(), dout.data(), inp.data(), w.data(),
                                        lengths, B, T, C, K);
    expect_close(download(be, dinp.get(), n_inp), expected_dinp, kActRtol<Act>, kActAtol<Act>,
                 "dinp, " + what);
    expect_close(download(be, d_dw->get(), n_w), expected_dw, kFloatRtol, 1e-4, "dweight, " + what);
    expect_close(download(be, d_db->get(), size_t(C)), expected_db, kFloatRtol, 1e-4,
                 "dbias, " + what);
  }
}

TYPED_TEST(CudaLogSoftmax, MatchesCpuInFloat) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  for (int V : {33, 1000}) {
    const int N = 20;
    const size_t n = size_t(N) * V;
    const auto logits = act_values<Act>(n, 90, -10.0f, 10.0f);
    auto d_logits = upload<Act>(be, logits);
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
TYPED_TEST(CudaCtcLoss, LossesAndGradientsMatchCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
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
  cuda_test::DeviceArray<Act> dlogits(be, n);
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
  expect_close(download(be, dlogits.get(), n), expected_grad, kActRtol<Act>, 1e-4, "dlogits");

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

// Targets long enough that each thread holds several states (S = 2L + 1
// over the block's 256 threads: 3 for L = 300, 2 for L = 130), and the
// frames of a 15 s utterance after subsampling (375) and more: the
// recursions add in double with float corrections, and the loss stays
// within 1e-9 of the CPU's double (1.3e-10 at 700 frames and L = 300).
TYPED_TEST(CudaCtcLoss, LongTargetsMatchCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
  const int T = 700, V = 30;
  const std::vector<int32_t> target_lengths = {300, 130}, input_lengths = {700, 375};
  const int B = int(target_lengths.size());
  std::vector<int32_t> targets;
  for (const int32_t L : target_lengths) {
    for (int i = 0; i < L; ++i) targets.push_back(1 + int32_t((i * 7919 + L) % (V - 1)));
  }
  const size_t n = size_t(B) * T * V;
  std::vector<float> logprobs(n);
  cpu().log_softmax_forward(logprobs.data(), random_floats(n, 101, -5.0f, 5.0f).data(), B * T, V);
  auto d_logprobs = upload_float(be, logprobs);
  cuda_test::DeviceArray<Act> dlogits(be, n);
  cuda_test::DeviceArray<double> d_losses(be, size_t(B));
  const std::vector<double> grad_scale(size_t(B), 1.0);
  be.ctc_loss(d_losses.get(), dlogits.get(), d_logprobs->get(), targets.data(),
              target_lengths.data(), input_lengths.data(), grad_scale.data(), nullptr, nullptr, B,
              T, V);
  std::vector<double> losses(B), expected_losses(B);
  be.to_host(losses.data(), d_losses.get(), losses.size() * sizeof(double));
  std::vector<float> expected_grad(n);
  cpu().ctc_loss(expected_losses.data(), expected_grad.data(), logprobs.data(), targets.data(),
                 target_lengths.data(), input_lengths.data(), grad_scale.data(), nullptr, nullptr,
                 B, T, V);
  for (int b = 0; b < B; ++b) {
    ASSERT_TRUE(std::isfinite(expected_losses[size_t(b)])) << "utterance " << b;
    EXPECT_NEAR(losses[size_t(b)], expected_losses[size_t(b)],
                1e-9 * std::abs(expected_losses[size_t(b)]))
        << "utterance " << b;
  }
  expect_close(download(be, dlogits.get(), n), expected_grad, kActRtol<Act>, 1e-4, "dlogits");
}

// The step's optimizer work on the device: the sum of squares added to the
// control (non-finite when a gradient is), the decision (kernels/step_control.h,
// against the CPU backend's), AdamW from the decided coefficients in one launch
// over segments laid out as a sharded optimizer's (moments compact, weights
// with holes, two decays), against the CPU backend's loop over the segments;
// the holes untouched, nothing on a skipped step.
TYPED_TEST(CudaOptimizer, SumSquaresDecisionAndAdamW) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  CudaBackend<Act>& be = backend<Act>();
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
  cuda_test::DeviceArray<Act> w_half(be, m);
  be.zero(w_half.get(), m * sizeof(Act));
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
  const std::vector<float> expected_half = rounded<Act>(got_w);
  for (const AdamWSegment& segment : segments) {
    for (size_t i = segment.offset; i < segment.offset + segment.count; ++i) {
      ASSERT_EQ(got_half[i], expected_half[i]) << "element " << i;
    }
  }
  EXPECT_EQ(got_half[1200], 0.0f) << "the compute copy is written in the segments only";
}

}  // namespace
}  // namespace mpiasr
