// cuBLASLt matmuls on the CPU in a fixed order (see cublas_lt.h).
#include "kernels/cuda_emu/cublas_lt.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda_emu/memory_check.h"
#include "src/base/error.h"

struct cublasLtContext {};

namespace {

bool is_16bit(cudaDataType type) {
  return type == CUDA_R_16F || type == CUDA_R_16BF;
}

size_t element_bytes(cudaDataType type) {
  return type == CUDA_R_32F ? 4 : 2;
}

// The largest power of two, up to 256, that divides `value` (256 for 0).
uint64_t alignment_of(uint64_t value) {
  return value == 0 ? 256 : std::min<uint64_t>(256, value & (~value + 1));
}

// Elements a column-major rows x cols matrix with leading dimension ld spans.
size_t span(uint64_t rows, uint64_t cols, int64_t ld) {
  return rows == 0 || cols == 0 ? 0 : size_t(ld) * size_t(cols - 1) + size_t(rows);
}

float load(const void* x, cudaDataType type, size_t at) {
  switch (type) {
    case CUDA_R_16F:
      return __half2float(static_cast<const __half*>(x)[at]);
    case CUDA_R_16BF:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(x)[at]);
    default:
      return static_cast<const float*>(x)[at];
  }
}

void store(void* x, cudaDataType type, size_t at, float value) {
  mpiasr::emu::detail::mark_written(static_cast<char*>(x) + at * (type == CUDA_R_32F ? 4 : 2),
                                    type == CUDA_R_32F ? 4 : 2);
  switch (type) {
    case CUDA_R_16F:
      static_cast<__half*>(x)[at] = __float2half_rn(value);
      break;
    case CUDA_R_16BF:
      static_cast<__nv_bfloat16*>(x)[at] = __float2bfloat16_rn(value);
      break;
    default:
      static_cast<float*>(x)[at] = value;
  }
}

std::vector<float> to_floats(const void* x, cudaDataType type, size_t count) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = load(x, type, i);
  return out;
}

// One matmul's arguments as checked: op(A) m x k, op(B) k x n, C and D m x n.
struct Matmul {
  bool ta = false, tb = false;
  uint64_t m = 0, n = 0, k = 0;
  cudaDataType ab_type = CUDA_R_16F, cd_type = CUDA_R_32F, bias_type = CUDA_R_32F;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int64_t lda = 0, ldb = 0, ldc = 0;
  void* bias = nullptr;
};

bool has_bias(cublasLtEpilogue_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
}
bool has_bias_gradient(cublasLtEpilogue_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_BGRADA || epilogue == CUBLASLT_EPILOGUE_BGRADB;
}

// What the algorithm the emulated heuristic finds needs (cublas_lt.h): the
// alignment in bytes of A, B, C, D and the bias vector, and the call it was
// found for (types, transposes, epilogue). Kept in cublasLtMatmulAlgo_t.
struct AlgoNeeds {
  uint64_t signature = 0;
  uint64_t alignment[5] = {1, 1, 1, 1, 1};  // A, B, C, D, bias
};
constexpr uint64_t kAlgoMagic = 0x6d70696173724c74;  // marks an algorithm the heuristic found
const char* const kOperandNames[5] = {"A", "B", "C", "D", "the bias vector"};

uint64_t signature_of(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                      cublasLtMatrixLayout_t d) {
  return uint64_t(a->type) | uint64_t(d->type) << 8 | uint64_t(desc->transa) << 16 |
         uint64_t(desc->transb) << 18 | uint64_t(desc->epilogue) << 20;
}

AlgoNeeds needs_of(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                   cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                   const cublasLtMatmulPreferenceOpaque_t& preference) {
  AlgoNeeds needs;
  needs.signature = signature_of(desc, a, d);
  const cublasLtMatrixLayout_t layouts[4] = {a, b, c, d};
  for (int x = 0; x < 4; ++x) {
    needs.alignment[x] = std::clamp<uint64_t>(
        preference.min_alignment[x], 1,
        alignment_of(uint64_t(layouts[x]->ld) * element_bytes(layouts[x]->type)));
  }
  needs.alignment[4] = alignment_of(reinterpret_cast<uintptr_t>(desc->bias));
  return needs;
}

cublasLtMatmulAlgo_t algo_of(const AlgoNeeds& needs) {
  cublasLtMatmulAlgo_t algo{};
  algo.data[0] = kAlgoMagic;
  algo.data[1] = needs.signature;
  std::copy(needs.alignment, needs.alignment + 5, algo.data + 2);
  return algo;
}

constexpr const char* kNoAlgoVariable = "MPIASR_EMU_CUBLASLT_NO_ALGO";
constexpr std::pair<cublasLtEpilogue_t, std::string_view> kEpilogueNames[] = {
    {CUBLASLT_EPILOGUE_DEFAULT, "DEFAULT"}, {CUBLASLT_EPILOGUE_RELU, "RELU"},
    {CUBLASLT_EPILOGUE_BIAS, "BIAS"},       {CUBLASLT_EPILOGUE_RELU_BIAS, "RELU_BIAS"},
    {CUBLASLT_EPILOGUE_BGRADA, "BGRADA"},   {CUBLASLT_EPILOGUE_BGRADB, "BGRADB"}};

// This thread's heuristic site and the sites there are (set_heuristic_site).
struct HeuristicSite {
  std::string site;
  std::vector<std::string> known_sites;
};
thread_local HeuristicSite heuristic_site;

// Whether MPIASR_EMU_CUBLASLT_NO_ALGO asks the heuristic to find nothing for
// `epilogue` at this thread's site; says so on stderr at each site's first.
bool no_algorithm_requested(cublasLtEpilogue_t epilogue) {
  const char* value = std::getenv(kNoAlgoVariable);
  if (!value) return false;
  const std::vector<std::string_view> known(heuristic_site.known_sites.begin(),
                                            heuristic_site.known_sites.end());
  if (!mpiasr::emu::detail::no_algorithm_asked(value, epilogue, heuristic_site.site, known)) {
    return false;
  }
  static std::mutex mutex;
  static std::set<std::string> noticed;
  const std::lock_guard<std::mutex> lock(mutex);
  if (noticed.insert(heuristic_site.site).second) {
    std::fprintf(stderr, "cuBLASLt (emulated): no algorithm at %s (%s=%s)\n",
                 heuristic_site.site.empty() ? "a query of no site" : heuristic_site.site.c_str(),
                 kNoAlgoVariable, value);
  }
  return true;
}

cublasStatus_t check(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                     cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                     Matmul* out) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!desc || !a || !b || !c || !d) return CUBLAS_STATUS_INVALID_VALUE;
  if (desc->compute_type != CUBLAS_COMPUTE_32F || desc->scale_type != CUDA_R_32F ||
      !is_16bit(a->type) || b->type != a->type || (c->type != a->type && c->type != CUDA_R_32F)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (c->type != d->type || c->rows != d->rows || c->cols != d->cols || c->ld != d->ld) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  Matmul mm;
  mm.ta = desc->transa != CUBLAS_OP_N;
  mm.tb = desc->transb != CUBLAS_OP_N;  // real data: C is T
  mm.m = d->rows;
  mm.n = d->cols;
  mm.k = mm.ta ? a->rows : a->cols;
  const uint64_t a_m = mm.ta ? a->cols : a->rows;
  const uint64_t b_k = mm.tb ? b->cols : b->rows, b_n = mm.tb ? b->rows : b->cols;
  const auto ld_fits = [](cublasLtMatrixLayout_t x) {
    return x->ld >= std::max<int64_t>(1, int64_t(x->rows));
  };
  if (a_m != mm.m || b_k != mm.k || b_n != mm.n || !ld_fits(a) || !ld_fits(b) || !ld_fits(d)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  mm.ab_type = a->type;
  mm.cd_type = d->type;
  mm.lda = a->ld;
  mm.ldb = b->ld;
  mm.ldc = d->ld;
  mm.epilogue = desc->epilogue;
  mm.bias = desc->bias;
  if (has_bias(mm.epilogue) || has_bias_gradient(mm.epilogue)) {
    // A bias has D's type, a bias gradient C's (the same here).
    if (!mm.bias) return CUBLAS_STATUS_INVALID_VALUE;
    if (desc->bias_type != -1 && desc->bias_type != int32_t(d->type)) {
      return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    mm.bias_type = d->type;
  }
  // The bias gradients' forms with kernels (cublas_lt.h).
  if ((mm.epilogue == CUBLASLT_EPILOGUE_BGRADA && mm.ta) ||
      (mm.epilogue == CUBLASLT_EPILOGUE_BGRADB && !mm.tb)) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  *out = mm;
  return CUBLAS_STATUS_SUCCESS;
}

// D = alpha op(A) op(B) + beta C in float, each element's products summed
// in ascending k, one at a time: a product of two 16-bit values is exact in
// float, so every rounding is a sum's and the order fixes the result,
// whatever the host's BLAS, thread count or vector width.
std::vector<float> fixed_order_product(const Matmul& mm, float alpha, const std::vector<float>& fa,
                                       const std::vector<float>& fb, float beta,
                                       std::vector<float> fd) {
  const size_t m = mm.m, n = mm.n, k = mm.k;
  // op(A) as m x k column-major, each column contiguous.
  std::vector<float> a_columns(m * k);
  for (size_t kk = 0; kk < k; ++kk)
    for (size_t i = 0; i < m; ++i)
      a_columns[kk * m + i] = fa[mm.ta ? i * size_t(mm.lda) + kk : kk * size_t(mm.lda) + i];
  std::vector<float> sums(m);
  for (size_t j = 0; j < n; ++j) {
    std::fill(sums.begin(), sums.end(), 0.0f);
    for (size_t kk = 0; kk < k; ++kk) {
      const float b = fb[mm.tb ? kk * size_t(mm.ldb) + j : j * size_t(mm.ldb) + kk];
      const float* a = a_columns.data() + kk * m;
      for (size_t i = 0; i < m; ++i) sums[i] += a[i] * b;
    }
    float* d = fd.data() + j * size_t(mm.ldc);
    for (size_t i = 0; i < m; ++i)
      d[i] = beta == 0.0f ? alpha * sums[i] : alpha * sums[i] + beta * d[i];
  }
  return fd;
}

void multiply(const Matmul& mm, float alpha, const void* A, const void* B, float beta,
              const void* C, void* D) {
  const size_t span_a = span(mm.ta ? mm.k : mm.m, mm.ta ? mm.m : mm.k, mm.lda);
  const size_t span_b = span(mm.tb ? mm.n : mm.k, mm.tb ? mm.k : mm.n, mm.ldb);
  const size_t span_d = span(mm.m, mm.n, mm.ldc);
  const std::vector<float> fa = to_floats(A, mm.ab_type, span_a);
  const std::vector<float> fb = to_floats(B, mm.ab_type, span_b);
  // beta == 0: C is not read (it may hold anything, NaN included).
  const std::vector<float> fd = fixed_order_product(
      mm, alpha, fa, fb, beta,
      beta == 0.0f ? std::vector<float>(span_d, 0.0f) : to_floats(C, mm.cd_type, span_d));
  const int m = int(mm.m), n = int(mm.n), k = int(mm.k);
  const bool relu =
      mm.epilogue == CUBLASLT_EPILOGUE_RELU || mm.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      const size_t at = size_t(j) * size_t(mm.ldc) + size_t(i);
      float value = fd[at];
      if (has_bias(mm.epilogue)) value += load(mm.bias, mm.bias_type, size_t(i));
      if (relu) value = std::max(value, 0.0f);
      store(D, mm.cd_type, at, value);
    }
  }
  if (mm.epilogue == CUBLASLT_EPILOGUE_BGRADA) {
    for (int i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (int kk = 0; kk < k; ++kk) {
        sum += fa[mm.ta ? size_t(i) * size_t(mm.lda) + size_t(kk)
                        : size_t(kk) * size_t(mm.lda) + size_t(i)];
      }
      store(mm.bias, mm.bias_type, size_t(i), sum);
    }
  }
  if (mm.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
    for (int j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int kk = 0; kk < k; ++kk) {
        sum += fb[mm.tb ? size_t(kk) * size_t(mm.ldb) + size_t(j)
                        : size_t(j) * size_t(mm.ldb) + size_t(kk)];
      }
      store(mm.bias, mm.bias_type, size_t(j), sum);
    }
  }
}

// Copies an attribute value of exactly `size` bytes, as cuBLASLt checks it.
template <typename T>
cublasStatus_t set(T* field, const void* buf, size_t size) {
  if (!buf || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(field, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

// cuBLASLt's numbering: major * 10000 + minor * 100 + patch; the emulator is 0.
size_t cublasLtGetVersion() {
  return 0;
}

const char* cublasLtGetStatusName(cublasStatus_t status) {
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
const char* cublasLtGetStatusString(cublasStatus_t status) {
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

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc,
                                        cublasComputeType_t compute_type,
                                        cudaDataType_t scale_type) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescOpaque_t{compute_type, scale_type};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
      return set(&desc->scale_type, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSA:
      return set(&desc->transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB:
      return set(&desc->transb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
      cublasLtEpilogue_t epilogue;
      const cublasStatus_t status = set(&epilogue, buf, size);
      if (status != CUBLAS_STATUS_SUCCESS) return status;
      if (epilogue != CUBLASLT_EPILOGUE_DEFAULT && epilogue != CUBLASLT_EPILOGUE_RELU &&
          !has_bias(epilogue) && !has_bias_gradient(epilogue)) {
        return CUBLAS_STATUS_NOT_SUPPORTED;
      }
      desc->epilogue = epilogue;
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      return set(&desc->bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
      return set(&desc->bias_type, buf, size);
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
      return set(&pref->max_workspace_bytes, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return set(&pref->min_alignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf,
                 size);
  }
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requested_algo_count,
    cublasLtMatmulHeuristicResult_t results[], int* return_algo_count) {
  if (!preference || requested_algo_count <= 0 || !results || !return_algo_count) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  *return_algo_count = 0;
  Matmul mm;
  const cublasStatus_t status = check(handle, desc, Adesc, Bdesc, Cdesc, Ddesc, &mm);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (no_algorithm_requested(mm.epilogue)) return CUBLAS_STATUS_NOT_SUPPORTED;
  results[0] = cublasLtMatmulHeuristicResult_t{};
  results[0].algo = algo_of(needs_of(desc, Adesc, Bdesc, Cdesc, Ddesc, *preference));
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *return_algo_count = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                              cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  Matmul mm;
  const cublasStatus_t status = check(handle, desc, Adesc, Bdesc, Cdesc, Ddesc, &mm);
  if (status != CUBLAS_STATUS_SUCCESS) return status;
  if (!alpha || !beta || (!workspace && workspace_bytes > 0) ||
      !mpiasr::emu::detail::stream_is_valid(stream)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const AlgoNeeds needs =
      algo ? AlgoNeeds{}
           : needs_of(desc, Adesc, Bdesc, Cdesc, Ddesc, cublasLtMatmulPreferenceOpaque_t{});
  if (algo && (algo->data[0] != kAlgoMagic || algo->data[1] != signature_of(desc, Adesc, Ddesc))) {
    std::fprintf(stderr,
                 "cuBLASLt (emulated): cublasLtMatmul with an algorithm the heuristic found for "
                 "other types, transposes or epilogue\n");
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  const uint64_t* alignment = algo ? algo->data + 2 : needs.alignment;
  const void* const operands[5] = {A, B, C, D, desc->bias};
  for (int x = 0; x < 5; ++x) {
    if (x == 4 && !has_bias(mm.epilogue) && !has_bias_gradient(mm.epilogue)) continue;
    if (reinterpret_cast<uintptr_t>(operands[x]) % alignment[x] != 0) {
      std::fprintf(stderr,
                   "cuBLASLt (emulated): %s at %p is not aligned to the %llu bytes its algorithm "
                   "needs (the heuristic assumed them: CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES, "
                   "the bias pointer it was asked with)\n",
                   kOperandNames[x], operands[x], static_cast<unsigned long long>(alignment[x]));
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  mpiasr::emu::detail::count_launch();
  if (mm.m == 0 || mm.n == 0) return CUBLAS_STATUS_SUCCESS;
  // Host scalars are read now, as cuBLASLt reads them when the call is made.
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  mpiasr::emu::detail::queue_work(stream, [=] { multiply(mm, a, A, B, b, C, D); });
  return CUBLAS_STATUS_SUCCESS;
}

namespace mpiasr::emu {

void set_heuristic_site(std::string_view site, std::span<const std::string_view> known_sites) {
  heuristic_site.site = site;
  heuristic_site.known_sites.assign(known_sites.begin(), known_sites.end());
}

namespace detail {

bool no_algorithm_asked(std::string_view value, cublasLtEpilogue_t epilogue, std::string_view site,
                        std::span<const std::string_view> known_sites) {
  if (value.empty()) return false;
  bool asked = false;
  for (size_t begin = 0; begin <= value.size();) {
    const size_t end = std::min(value.find(',', begin), value.size());
    const std::string_view item = value.substr(begin, end - begin);
    const auto named = std::find_if(std::begin(kEpilogueNames), std::end(kEpilogueNames),
                                    [&](const auto& entry) { return entry.second == item; });
    if (item == "all") {
      asked = true;
    } else if (named != std::end(kEpilogueNames)) {
      asked |= named->first == epilogue;
    } else if (std::find(known_sites.begin(), known_sites.end(), item) != known_sites.end()) {
      asked |= item == site;
    } else {
      std::string names = "all";
      for (const auto& entry : kEpilogueNames) names += ", " + std::string(entry.second);
      for (std::string_view known : known_sites) names += ", " + std::string(known);
      MPIASR_FAIL(ExitCode::kUsage, kNoAlgoVariable
                                        << "=" << value << ": \"" << item
                                        << "\" is none of the names it knows: " << names);
    }
    begin = end + 1;
  }
  return asked;
}

}  // namespace detail

}  // namespace mpiasr::emu
