// CUDA side of reference.h: CUDA-event timing on the device's current stream, cudaMemcpyAsync, and
// cuBLASLt called directly (its own handle, descriptors and workspace; the heuristic's best
// algorithm), planned once per GEMM.
// Row-major operands meet cuBLASLt's column-major convention by computing out^T = op(b)^T op(a)^T:
// a row-major [r, c] buffer is the column-major c x r matrix (leading dimension c) of its
// transpose.
#include <cublasLt.h>

#include <memory>
#include <type_traits>
#include <vector>

#include "tensor/cuda/common.cuh"
#include "tools/bench/reference.h"

namespace sprig::bench {

namespace {

void check_cublas(cublasStatus_t status, const char* expr) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("[bench] cuBLASLt failed with status ") +
                             std::to_string(static_cast<int>(status)) + " in " + expr);
}
#define CUBLAS_CHECK(expr) check_cublas((expr), #expr)

// Owning pointers for CUDA and cuBLASLt handles, released with their destroy function.
template <auto destroy> struct Destroyer {
  template <class P> void operator()(P p) const { destroy(p); }
};
template <class Handle, auto destroy>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>, Destroyer<destroy>>;

using LtHandle = Owned<cublasLtHandle_t, cublasLtDestroy>;
using MatmulDesc = Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Preference = Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;
using Event = Owned<cudaEvent_t, cudaEventDestroy>;
using DeviceBuffer = Owned<void*, cudaFree>;

cudaDataType_t cuda_data_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::bf16: return CUDA_R_16BF;
    case DType::f16: return CUDA_R_16F;
    default:
      throw std::invalid_argument(std::string("[bench] the cuBLASLt reference does not take ") +
                                  dtype_name(t));
  }
}

// Column-major layout of a row-major 2-D tensor: size(1) rows, size(0) columns.
Layout layout_of(const Tensor& t) {
  cublasLtMatrixLayout_t l = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, cuda_data_type(t.dtype()),
                                          static_cast<uint64_t>(t.size(1)),
                                          static_cast<uint64_t>(t.size(0)), t.size(1)));
  return Layout(l);
}

Event make_event() {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreate(&e));
  return Event(e);
}

// A planned out = op(a) @ op(b); cuBLASLt's A is b and its B is a (see the file header).
struct LtGemm {
  static constexpr size_t kWorkspaceBytes = 32u << 20;

  Tensor a, b, out;
  LtHandle handle;
  MatmulDesc desc;
  Layout a_layout, b_layout, out_layout;
  DeviceBuffer workspace;
  cublasLtMatmulAlgo_t algo{};

  LtGemm(const Tensor& a_, const Tensor& b_, const Tensor& out_, bool trans_a, bool trans_b)
      : a(a_),
        b(b_),
        out(out_),
        a_layout(layout_of(a_)),
        b_layout(layout_of(b_)),
        out_layout(layout_of(out_)) {
    CUDA_CHECK(cudaSetDevice(a.device().index));
    cublasLtHandle_t h = nullptr;
    CUBLAS_CHECK(cublasLtCreate(&h));
    handle.reset(h);
    cublasLtMatmulDesc_t d = nullptr;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    desc.reset(d);
    const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
    CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)));
    void* w = nullptr;
    CUDA_CHECK(cudaMalloc(&w, kWorkspaceBytes));
    workspace.reset(w);

    cublasLtMatmulPreference_t p = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p));
    const Preference pref(p);
    const uint64_t max_workspace = kWorkspaceBytes;
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &max_workspace, sizeof(max_workspace)));
    cublasLtMatmulHeuristicResult_t best{};
    int found = 0;
    CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(h, d, b_layout.get(), a_layout.get(),
                                                out_layout.get(), out_layout.get(), p, 1, &best,
                                                &found));
    if (found == 0)
      throw std::runtime_error("[bench] cuBLASLt has no algorithm for " + a.describe() + " @ " +
                               b.describe());
    algo = best.algo;
  }

  void run() const {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasLtMatmul(
        handle.get(), desc.get(), &alpha, b.data_ptr(), b_layout.get(), a.data_ptr(),
        a_layout.get(), &beta, out.data_ptr(), out_layout.get(), out.data_ptr(), out_layout.get(),
        &algo, workspace.get(), kWorkspaceBytes, cuda::current_stream(a.device().index)));
  }
};

}  // namespace

double cuda_median_seconds(int device, int warmup, int reps, const std::function<void()>& fn) {
  CUDA_CHECK(cudaSetDevice(device));
  const cudaStream_t stream = cuda::current_stream(device);
  for (int i = 0; i < warmup; ++i) fn();
  // Calls run back to back; event i opens call i and closes call i - 1.
  std::vector<Event> marks;
  for (int i = 0; i <= reps; ++i) marks.push_back(make_event());
  CUDA_CHECK(cudaEventRecord(marks[0].get(), stream));
  for (int i = 1; i <= reps; ++i) {
    fn();
    CUDA_CHECK(cudaEventRecord(marks[static_cast<size_t>(i)].get(), stream));
  }
  CUDA_CHECK(cudaEventSynchronize(marks.back().get()));
  std::vector<double> samples;
  for (size_t i = 1; i < marks.size(); ++i) {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, marks[i - 1].get(), marks[i].get()));
    samples.push_back(ms * 1e-3);
  }
  return median(samples);
}

std::function<void()> cuda_reference_copy(const Tensor& src, const Tensor& dst) {
  return [src, dst] {
    CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), src.nbytes(),
                               cudaMemcpyDeviceToDevice, cuda::current_stream(src.device().index)));
  };
}

std::function<void()> cuda_reference_gemm(const Tensor& a, const Tensor& b, const Tensor& out,
                                          bool trans_a, bool trans_b) {
  auto gemm = std::make_shared<const LtGemm>(a, b, out, trans_a, trans_b);
  return [gemm] { gemm->run(); };
}

}  // namespace sprig::bench
