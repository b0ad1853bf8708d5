// cuda_gemm's product and epilogues without cuBLASLt (see gemm_fallback.h):
//   gemm        one thread per C[m, n] (n fastest: neighbouring threads write
//               neighbouring elements): sum_k op(A)[m, k] op(B)[k, n] in float,
//               alpha, beta C, the bias and the ReLU, one rounding
//   bias_relu   one thread per C[m, n]: max?(C[m, n] + bias[n], 0)
//   row_sums    one thread per m: sum_k op(A)[m, k] in k order (deterministic)
// op(X)[r, c] of a row-major X with leading dimension ld is X[r ld + c], or
// X[c ld + r] when X is transposed.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm_fallback.h"
#include "kernels/cuda/launch.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

// The storage types of one call: AB for A and B, C for C and the vector.
template <typename AB, typename C>
struct GemmTypes {
  using ab = AB;
  using c = C;
};

template <typename T>
__device__ inline float operand(const T* x, bool trans, int ld, int64_t r, int64_t c) {
  return to_float(trans ? x[c * ld + r] : x[r * ld + c]);
}

template <typename Types>
__global__ void gemm_kernel(typename Types::c* C, const typename Types::ab* A,
                            const typename Types::ab* B, int M, int N, int K, int lda, int ldb,
                            int ldc, bool trans_a, bool trans_b, float alpha, float beta,
                            const typename Types::c* bias, bool relu) {
  MPIASR_GRID_STRIDE(i, size_t(M) * size_t(N)) {
    const int64_t m = int64_t(i / size_t(N)), n = int64_t(i % size_t(N));
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) {
      sum += operand(A, trans_a, lda, m, k) * operand(B, trans_b, ldb, k, n);
    }
    float value = alpha * sum;
    if (beta != 0.0f) value += beta * to_float(C[m * ldc + n]);
    if (bias) value += to_float(bias[n]);
    if (relu) value = fmaxf(value, 0.0f);
    C[m * ldc + n] = from_float<typename Types::c>(value);
  }
}

template <typename Types>
__global__ void bias_relu_kernel(typename Types::c* C, int M, int N, int ldc,
                                 const typename Types::c* bias, bool relu) {
  MPIASR_GRID_STRIDE(i, size_t(M) * size_t(N)) {
    const int64_t m = int64_t(i / size_t(N)), n = int64_t(i % size_t(N));
    float value = to_float(C[m * ldc + n]);
    if (bias) value += to_float(bias[n]);
    if (relu) value = fmaxf(value, 0.0f);
    C[m * ldc + n] = from_float<typename Types::c>(value);
  }
}

template <typename Types>
__global__ void row_sums_kernel(typename Types::c* sums, const typename Types::ab* A, int M, int K,
                                int lda, bool trans_a) {
  MPIASR_GRID_STRIDE(m, size_t(M)) {
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += operand(A, trans_a, lda, int64_t(m), k);
    sums[m] = from_float<typename Types::c>(sum);
  }
}

// Calls f(GemmTypes<AB, C>{}) for the storage types cuda_gemm accepts.
template <typename F>
void with_types(cudaDataType_t ab_type, cudaDataType_t c_type, F&& f) {
  const bool c_float = c_type == CUDA_R_32F;
  if (ab_type == CUDA_R_16F) {
    c_float ? f(GemmTypes<__half, float>{}) : f(GemmTypes<__half, __half>{});
  } else {
    c_float ? f(GemmTypes<__nv_bfloat16, float>{}) : f(GemmTypes<__nv_bfloat16, __nv_bfloat16>{});
  }
}

bool has_relu(GemmEpilogue epilogue) {
  return epilogue == GemmEpilogue::kRelu || epilogue == GemmEpilogue::kReluBias;
}
bool has_bias(GemmEpilogue epilogue) {
  return epilogue == GemmEpilogue::kBias || epilogue == GemmEpilogue::kReluBias;
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

void cuda_gemm_kernels(cudaStream_t stream, bool trans_a, bool trans_b, int M, int N, int K,
                       float alpha, const void* A, int lda, const void* B, int ldb,
                       cudaDataType_t ab_type, float beta, void* C, cudaDataType_t c_type, int ldc,
                       GemmEpilogue epilogue, void* vector) {
  with_types(ab_type, c_type, [&](auto types) {
    using AB = typename decltype(types)::ab;
    using CT = typename decltype(types)::c;
    MPIASR_LAUNCH(gemm_kernel<decltype(types)>, grid_for(size_t(M) * size_t(N)), kThreads, 0,
                  stream, static_cast<CT*>(C), static_cast<const AB*>(A), static_cast<const AB*>(B),
                  M, N, K, lda, ldb, ldc, trans_a, trans_b, alpha, beta,
                  has_bias(epilogue) ? static_cast<const CT*>(vector) : nullptr,
                  has_relu(epilogue));
  });
  if (epilogue == GemmEpilogue::kRowSumsOfA) {
    cuda_gemm_epilogue(stream, trans_a, M, N, K, A, lda, ab_type, C, c_type, ldc, epilogue, vector);
  }
}

void cuda_gemm_epilogue(cudaStream_t stream, bool trans_a, int M, int N, int K, const void* A,
                        int lda, cudaDataType_t ab_type, void* C, cudaDataType_t c_type, int ldc,
                        GemmEpilogue epilogue, void* vector) {
  with_types(ab_type, c_type, [&](auto types) {
    using CT = typename decltype(types)::c;
    if (epilogue == GemmEpilogue::kRowSumsOfA) {
      MPIASR_LAUNCH(row_sums_kernel<decltype(types)>, grid_for(size_t(M)), kThreads, 0, stream,
                    static_cast<CT*>(vector), static_cast<const typename decltype(types)::ab*>(A),
                    M, K, lda, trans_a);
    } else {
      MPIASR_LAUNCH(bias_relu_kernel<decltype(types)>, grid_for(size_t(M) * size_t(N)), kThreads, 0,
                    stream, static_cast<CT*>(C), M, N, ldc,
                    has_bias(epilogue) ? static_cast<const CT*>(vector) : nullptr,
                    has_relu(epilogue));
    }
  });
}

}  // namespace mpiasr
