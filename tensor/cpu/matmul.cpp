// CPU batched GEMM on Eigen: each product maps the contiguous row-major buffers as Eigen matrices
// (no copies) and evaluates op(A) * op(B) with noalias(). Eigen threads each large GEMM with
// OpenMP; with many products in the batch, the batch loop is split across threads instead (Eigen
// then runs single-threaded inside each).
//
// Eigen runs single-threaded everywhere else: the CPU kernels that call Eigen products on tiles
// (flash attention, the fused losses) do so from their own OpenMP loops, and an Eigen product that
// threads itself inside one (even one whose `if` clause left it to a single thread) starts a nested
// team, whose threads OpenMP creates afresh each time and which then compete with the outer team
// for the cores.
// Shapes: a [Ba, M, K] ([Ba, K, M] if trans_a), b [Bb, K, N] ([Bb, N, K] if trans_b) with Bb 1 or
// Ba, out [Ba, M, N]; f32 or f64 (the dispatcher converts 16-bit floats).
#include <omp.h>

// GCC 12 reports false -Wmaybe-uninitialized warnings inside its AVX-512 intrinsics headers when
// Eigen's GEMM inlines them; the pragma covers those headers, included first by Eigen here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

namespace {

// Batch sizes from this many products per thread are split over the batch.
constexpr int64_t kProductsPerThread = 2;
// Products below this many multiply-adds run on one thread: OpenMP's fork and join cost more than
// the split saves (and much more on a busy machine, where waiting threads lose their cores).
constexpr int64_t kParallelMacs = int64_t{1} << 24;

// Eigen's thread count outside cpu::matmul's top-level products: one.
[[maybe_unused]] const bool eigen_single_threaded = (Eigen::setNbThreads(1), true);

// Eigen's thread count while this lives (0: OpenMP's default team), one again after.
struct EigenThreads {
  explicit EigenThreads(int threads) { Eigen::setNbThreads(threads); }
  ~EigenThreads() { Eigen::setNbThreads(1); }
  EigenThreads(const EigenThreads&) = delete;
  EigenThreads& operator=(const EigenThreads&) = delete;
};

// c [m, n] = (or +=) op(a) @ op(b) on row-major buffers.
template <class T>
void gemm(const T* a, const T* b, T* c, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
          bool accumulate) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Map<const Matrix> A(a, trans_a ? k : m, trans_a ? m : k);
  const Eigen::Map<const Matrix> B(b, trans_b ? n : k, trans_b ? k : n);
  Eigen::Map<Matrix> C(c, m, n);
  const auto product = [&](const auto& op_a, const auto& op_b) {
    if (accumulate)
      C.noalias() += op_a * op_b;
    else
      C.noalias() = op_a * op_b;
  };
  const auto with_b = [&](const auto& op_a) {
    if (trans_b)
      product(op_a, B.transpose());
    else
      product(op_a, B);
  };
  if (trans_a)
    with_b(A.transpose());
  else
    with_b(A);
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b,
            bool accumulate) {
  const int64_t batch = out.size(0), m = out.size(1), n = out.size(2);
  const int64_t k = trans_a ? a.size(1) : a.size(2);
  const int64_t b_stride = b.size(0) == 1 ? 0 : k * n;  // 0: b is shared by the batch
  const bool over_batch = batch >= kProductsPerThread * omp_get_max_threads();
  // Threaded products only outside any parallel region (see the top of this file).
  const bool threaded = !over_batch && m * n * k >= kParallelMacs && omp_get_level() == 0;
  visit_f32_f64(out.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* pc = out.data<T>();
    const auto product = [&](int64_t i) {
      gemm(pa + i * m * k, pb + i * b_stride, pc + i * m * n, m, n, k, trans_a, trans_b,
           accumulate);
    };
    if (over_batch) {
#pragma omp parallel for
      for (int64_t i = 0; i < batch; ++i) product(i);
    } else {
      const EigenThreads eigen_threads(threaded ? 0 : 1);
      for (int64_t i = 0; i < batch; ++i) product(i);
    }
  });
}

}  // namespace sprig::cpu
