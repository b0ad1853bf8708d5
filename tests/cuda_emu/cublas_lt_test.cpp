// The emulated cuBLASLt's strict checks (kernels/cuda_emu/cublas_lt.h): the
// alignment an algorithm needs, from the heuristic's preferences, the leading
// dimensions and the bias pointer it was asked with; an algorithm used for
// another call; the bias gradients' forms; and MPIASR_EMU_CUBLASLT_NO_ALGO,
// by epilogue and by call site.
// Every operand is a 256-byte aligned cudaMalloc plus an offset in bytes.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "src/base/error.h"

namespace mpiasr {
namespace {

// An fp16 matmul D = op(A) op(B) of m = n = k = 64 (fp32 C and D, lda = ldb =
// ld, ldc = 64) with `epilogue`, its descriptors, and buffers of 64 KiB each.
class StrictMatmul {
 public:
  StrictMatmul(cublasLtEpilogue_t epilogue, bool tb = true, int ld = 64) {
    EXPECT_EQ(cublasLtCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              CUBLAS_STATUS_SUCCESS);
    const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    EXPECT_EQ(
        cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
        CUBLAS_STATUS_SUCCESS);
    set_epilogue(epilogue);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&ab_, CUDA_R_16F, 64, 64, ld), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&cd_, CUDA_R_32F, 64, 64, 64), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&preference_), CUBLAS_STATUS_SUCCESS);
    for (char*& buffer : buffers_) {
      EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&buffer), kBytes), cudaSuccess);
      EXPECT_EQ(cudaMemset(buffer, 0, kBytes), cudaSuccess);
    }
    set_bias(0);
  }
  ~StrictMatmul() {
    for (char* buffer : buffers_) EXPECT_EQ(cudaFree(buffer), cudaSuccess);
    EXPECT_EQ(cublasLtMatmulPreferenceDestroy(preference_), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutDestroy(ab_), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutDestroy(cd_), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescDestroy(desc_), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtDestroy(handle_), CUBLAS_STATUS_SUCCESS);
  }

  void set_epilogue(cublasLtEpilogue_t epilogue) {
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                             sizeof(epilogue)),
              CUBLAS_STATUS_SUCCESS);
  }
  void set_bias(size_t offset) {
    void* bias = buffers_[3] + offset;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                             sizeof(bias)),
              CUBLAS_STATUS_SUCCESS);
  }
  void set_min_alignment(cublasLtMatmulPreferenceAttributes_t attribute, uint32_t bytes) {
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(preference_, attribute, &bytes, sizeof(bytes)),
              CUBLAS_STATUS_SUCCESS);
  }
  // The algorithms the heuristic returns (it answers CUBLAS_STATUS_NOT_SUPPORTED for none).
  int algorithms() {
    int found = -1;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, desc_, ab_, ab_, cd_, cd_,
                                                                 preference_, 1, &result_, &found);
    EXPECT_EQ(status, found > 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED);
    return found;
  }
  // The matmul with the algorithm found last (or none), A, B and C/D at these offsets.
  cublasStatus_t run(size_t a_offset, size_t b_offset, size_t c_offset, bool with_algo = true) {
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(handle_, desc_, &one, buffers_[0] + a_offset, ab_, buffers_[1] + b_offset,
                          ab_, &zero, buffers_[2] + c_offset, cd_, buffers_[2] + c_offset, cd_,
                          with_algo ? &result_.algo : nullptr, nullptr, 0, nullptr);
  }

 private:
  static constexpr size_t kBytes = 64 << 10;
  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t ab_ = nullptr, cd_ = nullptr;
  cublasLtMatmulPreference_t preference_ = nullptr;
  char* buffers_[4] = {};  // A, B, C and D, the bias
  cublasLtMatmulHeuristicResult_t result_{};
};

// ld 64 halves is 128 bytes: the algorithm needs 128-byte A, B; C and D (ld
// 64 floats, 256 bytes) 256 bytes; less only where the preference says so.
TEST(EmulatedCublasLtStrict, AnAlgorithmNeedsTheAlignmentTheHeuristicAssumed) {
  StrictMatmul mm(CUBLASLT_EPILOGUE_DEFAULT);
  ASSERT_EQ(mm.algorithms(), 1);
  EXPECT_EQ(mm.run(0, 0, 0), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mm.run(128, 128, 256), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mm.run(16, 0, 0), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(mm.run(0, 64, 0), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(mm.run(0, 0, 128), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(mm.run(16, 0, 0, false), CUBLAS_STATUS_INVALID_VALUE) << "no algorithm: the default";
  mm.set_min_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 16);
  mm.set_min_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, 16);
  mm.set_min_alignment(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, 16);
  ASSERT_EQ(mm.algorithms(), 1);
  EXPECT_EQ(mm.run(16, 0, 16), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mm.run(8, 0, 0), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(mm.run(0, 16, 0), CUBLAS_STATUS_INVALID_VALUE) << "B keeps its 128 bytes";
}

// ld 66 halves is 132 bytes, a multiple of 4: no algorithm can need more of A and B.
TEST(EmulatedCublasLtStrict, TheLeadingDimensionBoundsTheAlignmentNeeded) {
  StrictMatmul mm(CUBLASLT_EPILOGUE_DEFAULT, true, 66);
  ASSERT_EQ(mm.algorithms(), 1);
  EXPECT_EQ(mm.run(4, 132, 0), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(mm.run(2, 0, 0), CUBLAS_STATUS_INVALID_VALUE);
}

// The heuristic reads the bias pointer's alignment; the algorithm keeps it.
TEST(EmulatedCublasLtStrict, TheBiasStaysAsAlignedAsTheHeuristicSawIt) {
  StrictMatmul mm(CUBLASLT_EPILOGUE_BIAS);
  ASSERT_EQ(mm.algorithms(), 1);
  EXPECT_EQ(mm.run(0, 0, 0), CUBLAS_STATUS_SUCCESS);
  mm.set_bias(4);
  EXPECT_EQ(mm.run(0, 0, 0), CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(mm.algorithms(), 1);
  EXPECT_EQ(mm.run(0, 0, 0), CUBLAS_STATUS_SUCCESS) << "asked again with the bias at 4 bytes";
}

TEST(EmulatedCublasLtStrict, AnAlgorithmFoundForAnotherEpilogueIsRefused) {
  StrictMatmul mm(CUBLASLT_EPILOGUE_BIAS);
  ASSERT_EQ(mm.algorithms(), 1);
  mm.set_epilogue(CUBLASLT_EPILOGUE_DEFAULT);
  EXPECT_EQ(mm.run(0, 0, 0), CUBLAS_STATUS_INVALID_VALUE);
}

// BGRADB only with op(B) = B^T, BGRADA only with op(A) = A (A is not transposed here).
TEST(EmulatedCublasLtStrict, BiasGradientsHaveAlgorithmsInOneFormEach) {
  StrictMatmul b_transposed(CUBLASLT_EPILOGUE_BGRADB, true);
  EXPECT_EQ(b_transposed.algorithms(), 1);
  StrictMatmul b_plain(CUBLASLT_EPILOGUE_BGRADB, false);
  EXPECT_EQ(b_plain.algorithms(), 0);
  EXPECT_EQ(b_plain.run(0, 0, 0, false), CUBLAS_STATUS_NOT_SUPPORTED);
  StrictMatmul a_plain(CUBLASLT_EPILOGUE_BGRADA, false);
  EXPECT_EQ(a_plain.algorithms(), 1);
}

TEST(EmulatedCublasLtStrict, NoAlgorithmForTheEpiloguesTheVariableNames) {
  StrictMatmul bias(CUBLASLT_EPILOGUE_BIAS), plain(CUBLASLT_EPILOGUE_DEFAULT);
  ASSERT_EQ(setenv("MPIASR_EMU_CUBLASLT_NO_ALGO", "RELU,BIAS", 1), 0);
  EXPECT_EQ(bias.algorithms(), 0);
  EXPECT_EQ(plain.algorithms(), 1);
  ASSERT_EQ(setenv("MPIASR_EMU_CUBLASLT_NO_ALGO", "all", 1), 0);
  EXPECT_EQ(plain.algorithms(), 0);
  ASSERT_EQ(unsetenv("MPIASR_EMU_CUBLASLT_NO_ALGO"), 0);
  EXPECT_EQ(bias.algorithms(), 1);
}

constexpr std::string_view kSites[] = {"linear.forward", "linear.dweight"};

bool asked(std::string_view value, cublasLtEpilogue_t epilogue, std::string_view site) {
  return emu::detail::no_algorithm_asked(value, epilogue, site, kSites);
}

TEST(EmulatedCublasLtStrict, TheVariableNamesSitesEpiloguesOrAll) {
  EXPECT_TRUE(asked("linear.dweight", CUBLASLT_EPILOGUE_DEFAULT, "linear.dweight"));
  EXPECT_TRUE(asked("linear.dweight", CUBLASLT_EPILOGUE_BGRADB, "linear.dweight"));
  EXPECT_FALSE(asked("linear.dweight", CUBLASLT_EPILOGUE_DEFAULT, "linear.forward"));
  EXPECT_FALSE(asked("linear.dweight", CUBLASLT_EPILOGUE_DEFAULT, "")) << "a query of no site";
  EXPECT_TRUE(asked("BIAS,linear.forward", CUBLASLT_EPILOGUE_BIAS, "linear.dweight"));
  EXPECT_TRUE(asked("BIAS,linear.forward", CUBLASLT_EPILOGUE_DEFAULT, "linear.forward"));
  EXPECT_FALSE(asked("BIAS,linear.forward", CUBLASLT_EPILOGUE_DEFAULT, "linear.dweight"));
  EXPECT_FALSE(asked("BIAS,linear.forward", CUBLASLT_EPILOGUE_RELU_BIAS, "linear.dweight"));
  EXPECT_TRUE(asked("all", CUBLASLT_EPILOGUE_DEFAULT, ""));
  EXPECT_FALSE(asked("", CUBLASLT_EPILOGUE_DEFAULT, "linear.forward"));
}

// An unknown name (a renamed site, a misspelt epilogue, an empty item) stops
// the query, even after a name that matched.
TEST(EmulatedCublasLtStrict, AnUnknownNameIsAnErrorListingTheKnownOnes) {
  for (const char* value : {"linear.dweigt", "all,bias", "linear.forward,", "conv2d.dinp"}) {
    try {
      asked(value, CUBLASLT_EPILOGUE_DEFAULT, "linear.forward");
      ADD_FAILURE() << value << " was accepted";
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_EQ(error.code(), ExitCode::kUsage);
      EXPECT_NE(message.find("MPIASR_EMU_CUBLASLT_NO_ALGO=" + std::string(value) + ": "),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("names it knows: all, DEFAULT, RELU, BIAS, RELU_BIAS, BGRADA, "
                             "BGRADB, linear.forward, linear.dweight"),
                std::string::npos)
          << message;
    }
  }
}

// The heuristic learns the site from set_heuristic_site (as kernels/cuda/gemm.cpp
// tells it) and says once per site that it found no algorithm there.
TEST(EmulatedCublasLtStrict, NoAlgorithmAtTheSiteTheVariableNamesSaidOnce) {
  StrictMatmul mm(CUBLASLT_EPILOGUE_DEFAULT);
  ASSERT_EQ(setenv("MPIASR_EMU_CUBLASLT_NO_ALGO", "linear.dweight", 1), 0);
  emu::set_heuristic_site("linear.forward", kSites);
  EXPECT_EQ(mm.algorithms(), 1);
  emu::set_heuristic_site("linear.dweight", kSites);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(mm.algorithms(), 0);
  EXPECT_EQ(mm.algorithms(), 0);
  const std::string notices = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(notices,
            "cuBLASLt (emulated): no algorithm at linear.dweight "
            "(MPIASR_EMU_CUBLASLT_NO_ALGO=linear.dweight)\n");
  ASSERT_EQ(unsetenv("MPIASR_EMU_CUBLASLT_NO_ALGO"), 0);
  EXPECT_EQ(mm.algorithms(), 1);
  emu::set_heuristic_site("", {});
}

}  // namespace
}  // namespace mpiasr
