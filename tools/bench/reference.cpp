// CPU side of reference.h (parallel memcpy, Eigen GEMM, wall-clock timer), the argument checks
// shared by both devices, and the dispatch to the CUDA side.
#include "tools/bench/reference.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tensor/cuda/kernels.h"

// GCC 12 reports false -Wmaybe-uninitialized warnings inside the AVX-512 intrinsics that Eigen's
// GEMM inlines; the pragma covers those headers, included first here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

namespace sprig::bench {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("[bench] " + msg); }

void check_copy(const Tensor& src, const Tensor& dst) {
  if (!src.is_contiguous() || !dst.is_contiguous() || src.nbytes() != dst.nbytes() ||
      !(src.device() == dst.device()))
    fail("reference copy needs contiguous tensors of equal byte size on one device, got " +
         src.describe() + " and " + dst.describe());
}

void check_gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b) {
  const std::string operands = a.describe() + (trans_a ? "^T" : "") + " @ " + b.describe() +
                               (trans_b ? "^T" : "") + " -> " + out.describe();
  for (const Tensor* t : {&a, &b, &out})
    if (t->dim() != 2 || !t->is_contiguous() || t->dtype() != a.dtype() ||
        !(t->device() == a.device()))
      fail("reference GEMM needs 2-D contiguous tensors of one dtype on one device: " + operands);
  const int64_t m = a.size(trans_a ? 1 : 0), k = a.size(trans_a ? 0 : 1);
  const int64_t kb = b.size(trans_b ? 1 : 0), n = b.size(trans_b ? 0 : 1);
  if (k != kb || out.size(0) != m || out.size(1) != n)
    fail("reference GEMM shapes do not match: " + operands);
}

}  // namespace

double median(std::vector<double> samples) {
  if (samples.empty()) fail("no timing samples");
  const size_t mid = samples.size() / 2;
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(mid),
                   samples.end());
  return samples[mid];
}

double median_seconds(Device device, int warmup, int reps, const std::function<void()>& fn) {
  if constexpr (cuda::kBuilt)
    if (device.is_cuda()) return cuda_median_seconds(device.index, warmup, reps, fn);
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> samples;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    samples.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return median(samples);
}

std::function<void()> reference_copy(const Tensor& src, const Tensor& dst) {
  check_copy(src, dst);
  if constexpr (cuda::kBuilt)
    if (src.device().is_cuda()) return cuda_reference_copy(src, dst);
  // Each OpenMP thread copies its share, as sprig's kernels split their loops.
  return [src, dst] {
    const char* from = static_cast<const char*>(src.data_ptr());
    char* to = static_cast<char*>(dst.data_ptr());
    const size_t bytes = src.nbytes();
#pragma omp parallel
    {
      const size_t threads = static_cast<size_t>(omp_get_num_threads());
      const size_t t = static_cast<size_t>(omp_get_thread_num());
      const size_t begin = bytes * t / threads, end = bytes * (t + 1) / threads;
      std::memcpy(to + begin, from + begin, end - begin);
    }
  };
}

std::function<void()> reference_gemm(const Tensor& a, const Tensor& b, const Tensor& out,
                                     bool trans_a, bool trans_b) {
  check_gemm(a, b, out, trans_a, trans_b);
  if constexpr (cuda::kBuilt)
    if (a.device().is_cuda()) return cuda_reference_gemm(a, b, out, trans_a, trans_b);
  if (a.dtype() != DType::f32)
    fail(std::string("CPU reference GEMM is f32, got ") + dtype_name(a.dtype()));
  return [a, b, out, trans_a, trans_b] {
    using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const Eigen::Map<const Matrix> A(a.data<float>(), a.size(0), a.size(1));
    const Eigen::Map<const Matrix> B(b.data<float>(), b.size(0), b.size(1));
    Eigen::Map<Matrix> C(out.data<float>(), out.size(0), out.size(1));
    // Threaded as Eigen is by default (sprig keeps Eigen single-threaded outside its own GEMMs).
    const int threads = Eigen::nbThreads();
    Eigen::setNbThreads(0);
    if (!trans_a && !trans_b)
      C.noalias() = A * B;
    else if (!trans_a)
      C.noalias() = A * B.transpose();
    else if (!trans_b)
      C.noalias() = A.transpose() * B;
    else
      C.noalias() = A.transpose() * B.transpose();
    Eigen::setNbThreads(threads);
  };
}

}  // namespace sprig::bench
