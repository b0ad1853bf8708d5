// cuBLAS GEMMs through the CPU backend's GEMM (see cublas.h). A column-major
// product C = op(A) op(B) (m x n) is the row-major product
// C^T = op(B)^T op(A)^T (n x m) over the same memory, so cpu_gemm gets B before
// A with the same transpose flags and m and n swapped (the mirror of
// kernels/cuda/gemm.cpp).
#include "kernels/cuda_emu/cublas.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/gemm.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

namespace {

// Elements a column-major rows x cols matrix with leading dimension ld spans.
size_t span(int rows, int cols, int ld) {
  return rows == 0 || cols == 0 ? 0 : size_t(ld) * size_t(cols - 1) + size_t(rows);
}

// batch spans of `count` elements of x (16-bit `type`), `stride` apart, as
// float, one after another.
std::vector<float> to_floats(const void* x, cudaDataType type, size_t count, long long stride,
                             int batch) {
  std::vector<float> out(count * size_t(batch));
  for (int b = 0; b < batch; ++b) {
    for (size_t i = 0; i < count; ++i) {
      const long long at = b * stride + static_cast<long long>(i);
      out[size_t(b) * count + i] = type == CUDA_R_16F
                                       ? __half2float(static_cast<const __half*>(x)[at])
                                       : __bfloat162float(static_cast<const __nv_bfloat16*>(x)[at]);
    }
  }
  return out;
}

// The product gemm() below asks for, its arguments checked: A and B of the
// 16-bit `type`, C of that type or float.
void multiply(bool ta, bool tb, int m, int n, int k, float a, const void* A, int lda,
              long long stride_a, const void* B, int ldb, long long stride_b, cudaDataType type,
              float b, void* C, cudaDataType Ctype, int ldc, long long stride_c, int batch) {
  const size_t span_a = span(ta ? k : m, ta ? m : k, lda);
  const size_t span_b = span(tb ? n : k, tb ? k : n, ldb);
  const size_t span_c = span(m, n, ldc);
  const std::vector<float> fa = to_floats(A, type, span_a, stride_a, batch);
  const std::vector<float> fb = to_floats(B, type, span_b, stride_b, batch);
  if (Ctype == CUDA_R_32F) {
    mpiasr::cpu_gemm<float>(tb, ta, n, m, k, a, fb.data(), ldb, int64_t(span_b), fa.data(), lda,
                            int64_t(span_a), b, static_cast<float*>(C), ldc, stride_c, batch);
    return;
  }
  // beta == 0: C is not read (it may hold anything, NaN included).
  std::vector<float> fc = b == 0.0f ? std::vector<float>(span_c * size_t(batch), 0.0f)
                                    : to_floats(C, Ctype, span_c, stride_c, batch);
  mpiasr::cpu_gemm<float>(tb, ta, n, m, k, a, fb.data(), ldb, int64_t(span_b), fa.data(), lda,
                          int64_t(span_a), b, fc.data(), ldc, int64_t(span_c), batch);
  for (int batch_index = 0; batch_index < batch; ++batch_index) {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        const size_t at = size_t(j) * size_t(ldc) + size_t(i);
        const long long to = batch_index * stride_c + static_cast<long long>(at);
        const float value = fc[size_t(batch_index) * span_c + at];
        if (Ctype == CUDA_R_16F) {
          static_cast<__half*>(C)[to] = __float2half_rn(value);
        } else {
          static_cast<__nv_bfloat16*>(C)[to] = __float2bfloat16_rn(value);
        }
      }
    }
  }
}

cublasStatus_t gemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                    int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                    int lda, long long stride_a, const void* B, cudaDataType Btype, int ldb,
                    long long stride_b, const void* beta, void* C, cudaDataType Ctype, int ldc,
                    long long stride_c, int batch, cublasComputeType_t compute) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if ((Atype != CUDA_R_16F && Atype != CUDA_R_16BF) || Btype != Atype ||
      (Ctype != Atype && Ctype != CUDA_R_32F) || compute != CUBLAS_COMPUTE_32F) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const auto valid_op = [](cublasOperation_t op) {
    return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C;
  };
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;  // real data: C is T
  if (!valid_op(transa) || !valid_op(transb) || m < 0 || n < 0 || k < 0 || batch < 0 ||
      lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) || ldc < std::max(1, m) ||
      !alpha || !beta) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  mpiasr::emu::detail::count_launch();
  if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
  // Host scalars are read now, as cuBLAS reads them when the call is made.
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  if (mpiasr::emu::detail::stream_is_capturing(handle->stream)) {
    mpiasr::emu::detail::record_work(handle->stream, [=] {
      multiply(ta, tb, m, n, k, a, A, lda, stride_a, B, ldb, stride_b, Atype, b, C, Ctype, ldc,
               stride_c, batch);
    });
    return CUBLAS_STATUS_SUCCESS;
  }
  multiply(ta, tb, m, n, k, a, A, lda, stride_a, B, ldb, stride_b, Atype, b, C, Ctype, ldc,
           stride_c, batch);
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!mpiasr::emu::detail::stream_is_valid(stream)) return CUBLAS_STATUS_INVALID_VALUE;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  return workspace || bytes == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

// cuBLAS's own wording.
const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS:
      return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "the library was not initialized";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "the functionality requested is not supported";
  }
  return "unknown error";
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t) {
  return gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C,
              Ctype, ldc, 0, 1, computeType);
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
    const void* alpha, const void* A, cudaDataType Atype, int lda, long long strideA, const void* B,
    cudaDataType Btype, int ldb, long long strideB, const void* beta, void* C, cudaDataType Ctype,
    int ldc, long long strideC, int batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t) {
  return gemm(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb,
              strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType);
}
