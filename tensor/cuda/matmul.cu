// CUDA batched GEMM on cuBLASLt, the twin of tensor/cpu/matmul.cpp (same contract):
// a [Ba, M, K] ([Ba, K, M] if trans_a), b [Bb, K, N] ([Bb, N, K] if trans_b) with Bb 1 or Ba,
// out [Ba, M, N] = (or +=) op(a) @ op(b); contiguous, one dtype.
// Precision: f32 in plain fp32 (CUBLAS_COMPUTE_32F, no TF32) so results track the CPU closely;
// bf16/f16 inputs and outputs stay in their dtype with fp32 accumulation; f64 in fp64.
// Row-major buffers read as column-major are transposes, so the product is computed as
// C^T = op(B)^T op(A)^T: b is cuBLASLt's matrix "A", a its "B", and out, column-major, is C^T.
// The batch is a strided batch, with stride 0 for a shared b; accumulate is beta = 1.
// Plans (descriptor, layouts, the heuristic's algorithm) are made once per GemmKey and cached
// (gemm_plan.h): a call costs one hash lookup besides cublasLtMatmul itself.
#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <type_traits>

#include "tensor/cuda/context.cuh"
#include "tensor/cuda/gemm_plan.h"

namespace sprig::cuda {

namespace {

// cuBLASLt descriptors owned by unique_ptrs.
template <class Handle, cublasStatus_t (*Destroy)(Handle)> struct LtDeleter {
  void operator()(Handle h) const { Destroy(h); }
};
template <class Handle, cublasStatus_t (*Destroy)(Handle)>
using LtPtr = std::unique_ptr<std::remove_pointer_t<Handle>, LtDeleter<Handle, Destroy>>;
using MatmulDesc = LtPtr<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using MatrixLayout = LtPtr<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = LtPtr<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

struct GemmTypes {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;  // type of alpha and beta
};

GemmTypes gemm_types(DType dtype) {
  switch (dtype) {
    case DType::f32: return {CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::bf16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::f16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::f64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    default:
      throw std::invalid_argument(std::string("[matmul] unsupported dtype ") + dtype_name(dtype));
  }
}

// Column-major layout of a row-major [batch, rows, cols] buffer (that is, its transpose), with
// `stride` elements between consecutive matrices of the batch.
MatrixLayout row_major_layout(cudaDataType_t type, int64_t rows, int64_t cols, int32_t batch,
                              int64_t stride) {
  cublasLtMatrixLayout_t raw;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, static_cast<uint64_t>(cols),
                                          static_cast<uint64_t>(rows), cols));
  MatrixLayout layout(raw);
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                sizeof(batch)));
  CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &stride, sizeof(stride)));
  return layout;
}

// An operand's alignment (gemm_plan.h): the heuristic must only return algorithms that accept
// it. Row-major [rows, cols] with `cols` elements per row; stride 0 for a single matrix.
uint32_t alignment_of(const Tensor& t, int64_t cols, int64_t batch_stride) {
  const auto bytes = static_cast<uint64_t>(dtype_size(t.dtype()));
  return operand_alignment(reinterpret_cast<uintptr_t>(t.data_ptr()),
                           bytes * static_cast<uint64_t>(cols),
                           bytes * static_cast<uint64_t>(batch_stride));
}

void set_preference(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                    const auto& value) {
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)));
}

// The operation: compute and scale types, and the transposes (cuBLASLt's A is b, its B is a).
MatmulDesc matmul_desc(const GemmTypes& types, bool trans_a, bool trans_b) {
  cublasLtMatmulDesc_t raw;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw, types.compute, types.scale));
  MatmulDesc desc(raw);
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)));
  return desc;
}

std::string sizes_str(int64_t batch, int64_t m, int64_t n, int64_t k) {
  return "batch " + std::to_string(batch) + ", M " + std::to_string(m) + ", N " +
         std::to_string(n) + ", K " + std::to_string(k);
}

// Everything cublasLtMatmul needs besides the pointers and scalars.
struct GemmPlan {
  MatmulDesc desc;
  MatrixLayout layout_b, layout_a, layout_out;  // cuBLASLt's A, B and C = D
  cublasLtMatmulAlgo_t algo;
};

// The plan of `key`: its layouts, and the heuristic's best algorithm within the context's
// workspace and the key's alignments; throws when cuBLASLt has none.
GemmPlan make_plan(const GemmKey& key, const DeviceContext& ctx) {
  const GemmTypes types = gemm_types(key.dtype);
  const int64_t m = key.m, n = key.n, k = key.k;
  const auto batch = static_cast<int32_t>(key.batch);
  const int64_t b_stride = key.shared_b ? 0 : k * n;
  GemmPlan plan{
      matmul_desc(types, key.trans_a, key.trans_b),
      row_major_layout(types.data, key.trans_b ? n : k, key.trans_b ? k : n, batch, b_stride),
      row_major_layout(types.data, key.trans_a ? k : m, key.trans_a ? m : k, batch, m * k),
      row_major_layout(types.data, m, n, batch, m * n),
      {}};
  cublasLtMatmulPreference_t raw;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw));
  const Preference pref(raw);
  set_preference(raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                 static_cast<uint64_t>(ctx.workspace_bytes));
  set_preference(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
  set_preference(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
  set_preference(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_out);
  set_preference(raw, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_out);
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(ctx.blas_lt, plan.desc.get(), plan.layout_b.get(),
                                              plan.layout_a.get(), plan.layout_out.get(),
                                              plan.layout_out.get(), raw, 1, &result, &found));
  if (found == 0)
    throw std::runtime_error(std::string("[matmul] cuBLASLt has no algorithm for ") +
                             dtype_name(key.dtype) + " " + sizes_str(key.batch, m, n, k));
  plan.algo = result.algo;
  return plan;
}

GemmPlanCache<GemmPlan>& gemm_plans() {
  static GemmPlanCache<GemmPlan> cache(4096);
  return cache;
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b,
            bool accumulate, cudaStream_t stream) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2);
  const int64_t k = trans_a ? a.size(1) : a.size(2);
  if (out.numel() == 0) return;
  if (k == 0) {  // an empty sum: out = 0, or unchanged when accumulating
    if (!accumulate) CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream));
    return;
  }
  if (std::max({batch, m, n, k}) > INT32_MAX)
    throw std::invalid_argument("[matmul] sizes beyond cuBLASLt's int32 range: " +
                                sizes_str(batch, m, n, k));
  const DeviceContext& ctx = device_context(out.device().index);
  // Row lengths and batch strides (0: one matrix, or b shared by the batch) of the operands.
  const int64_t b_cols = trans_b ? k : n, a_cols = trans_a ? m : k;
  const bool shared_b = b.size(0) == 1;
  const int64_t batched = batch > 1 ? 1 : 0, b_stride = shared_b ? 0 : k * n;
  const GemmKey key{out.device().index,
                    out.dtype(),
                    batch,
                    m,
                    n,
                    k,
                    trans_a,
                    trans_b,
                    shared_b,
                    alignment_of(a, a_cols, batched * m * k),
                    alignment_of(b, b_cols, batched * b_stride),
                    alignment_of(out, n, batched * m * n)};
  const std::shared_ptr<const GemmPlan> plan =
      gemm_plans().get(key, [&] { return make_plan(key, ctx); });

  // alpha = 1 and beta = 1 when accumulating (else 0), in the scale type.
  const float alpha32 = 1.0f, beta32 = accumulate ? 1.0f : 0.0f;
  const double alpha64 = alpha32, beta64 = beta32;
  const bool fp64 = out.dtype() == DType::f64;
  const void* alpha = fp64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = fp64 ? static_cast<const void*>(&beta64) : &beta32;
  CUBLAS_CHECK(cublasLtMatmul(
      ctx.blas_lt, plan->desc.get(), alpha, b.data_ptr(), plan->layout_b.get(), a.data_ptr(),
      plan->layout_a.get(), beta, out.data_ptr(), plan->layout_out.get(), out.data_ptr(),
      plan->layout_out.get(), &plan->algo, ctx.workspace, ctx.workspace_bytes, stream));
}

}  // namespace sprig::cuda
