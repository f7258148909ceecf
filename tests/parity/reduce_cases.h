// The parity tables of the reductions and softmax, f32 and bf16, over the last dim (a block per
// line) and other dims (a thread per line, or a split team as threads_per_line picks): sum, mean,
// max, logsumexp and argmax (exact: both devices see the same values, so the first maximum is the
// same element), with every backward on the GPU; softmax and log_softmax with their backward.
// The GPU runs every (rows, cols) pair of awkward sizes; the emulation, which would run about a
// million threads per kernel on the largest, every reduced length on 1 and 17 lines and over dim
// 0 on 300 (two blocks of threads, the second ragged). Strided inputs on the GPU.
#pragma once

#include <string>
#include <vector>

#include "tensor/cuda/kernels.h"
#include "tensor/ops.h"
#include "tests/parity/parity.h"

namespace sprig::parity {

struct ReducedShape {
  Shape shape;
  int64_t dim;
  unsigned on;
};

inline std::vector<ReducedShape> reduced_shapes() {
  const std::vector<int64_t> sizes{1, 17, 31, 33, 97, 1025};
  std::vector<ReducedShape> out;
  for (int64_t rows : sizes)
    for (int64_t cols : sizes)
      for (int64_t dim : {0, 1}) {
        const int64_t lines = dim == 0 ? cols : rows;
        out.push_back({{rows, cols}, dim, lines == 1 || lines == 17 ? kEveryDevice : kCuda});
      }
  for (int64_t n : sizes) out.push_back({{n, 300}, 0, kEmu});
  out.push_back({{3, 97, 33}, 1, kEveryDevice});
  return out;
}

inline std::string reduced_name(const std::string& op, DType dtype, const ReducedShape& r) {
  return case_name(op, dtype, r.shape) + " dim " + std::to_string(r.dim);
}

// The emulated reduction of x over dim, into NaNs in the shape and dtype of `like` (the CPU's).
inline Tensor emu_reduce(ReduceOp op, const Tensor& x, int64_t dim, const Tensor& like) {
  const Tensor out = nan_like(like);
  cuda::reduce(op, x, out, dim, nullptr);
  return out;
}

inline std::vector<Case> reduce_cases() {
  std::vector<Case> cases;
  for (DType dt : {DType::f32, DType::bf16})
    for (const ReducedShape& r : reduced_shapes())
      cases.push_back(
          {reduced_name("reduce", dt, r), r.on, [=](Backend b) {
             const int64_t n = r.shape[static_cast<size_t>(r.dim)], d = r.dim;
             const Tensor x = on(b, testing::rand_normal(r.shape, 1, dt));
             if (b == kEmu) {
               const Tensor idx = Tensor::full(argmax(x, d).shape(), -1, DType::i64);
               cuda::argmax(x, idx, d, nullptr);
               return std::vector<Output>{
                   {"sum", emu_reduce(ReduceOp::sum, x, d, sum(x, d)), n},
                   {"mean", emu_reduce(ReduceOp::mean, x, d, mean(x, d)), n},
                   {"max", emu_reduce(ReduceOp::max, x, d, max(x, d)), n},
                   {"logsumexp", emu_reduce(ReduceOp::logsumexp, x, d, logsumexp(x, d)), n},
                   {"argmax", idx, 1, 1.0, true}};
             }
             const Tensor xs = testing::non_contiguous(x), idx = argmax(xs, d);
             const Tensor dy = on(b, testing::rand_normal(idx.shape(), 2, dt));
             const Tensor lse = logsumexp(x, d);
             return std::vector<Output>{
                 {"sum", sum(x, d), n},
                 {"mean", mean(xs, d), n},
                 {"max", max(xs, d), n},
                 {"logsumexp", lse, n},
                 {"logsumexp keepdim", logsumexp(x, d, true), n},
                 {"argmax", idx, 1, 1.0, true},
                 {"sum_backward", sum_backward(dy, r.shape, d, false)},
                 {"mean_backward", mean_backward(dy, r.shape, d, false)},
                 {"max_backward", max_backward(dy, x, idx, d, false)},
                 {"logsumexp_backward", logsumexp_backward(dy, x, lse, d, false)}};
           }});
  return cases;
}

inline std::vector<Case> softmax_cases() {
  std::vector<Case> cases;
  for (DType dt : {DType::f32, DType::bf16})
    for (const ReducedShape& r : reduced_shapes())
      cases.push_back({reduced_name("softmax", dt, r), r.on, [=](Backend b) {
                         const int64_t n = r.shape[static_cast<size_t>(r.dim)], d = r.dim;
                         const Tensor x = on(b, mul(testing::rand_normal(r.shape, 4, dt), 3.0));
                         const Tensor dy = on(b, testing::rand_normal(r.shape, 5, dt));
                         Tensor p, lp, dp, dlp;
                         if (b == kEmu) {
                           p = nan_like(x), lp = nan_like(x), dp = nan_like(x), dlp = nan_like(x);
                           cuda::softmax(x, p, d, false, nullptr);
                           cuda::softmax(x, lp, d, true, nullptr);
                           cuda::softmax_backward(p, dy, dp, d, false, nullptr);
                           cuda::softmax_backward(lp, dy, dlp, d, true, nullptr);
                         } else {
                           p = softmax(testing::non_contiguous(x), d), lp = log_softmax(x, d);
                           dp = softmax_backward(p, testing::non_contiguous(dy), d);
                           dlp = log_softmax_backward(lp, dy, d);
                         }
                         // Each normalisation sums n terms.
                         return std::vector<Output>{{"softmax", p, n},
                                                    {"log_softmax", lp, n},
                                                    {"softmax_backward", dp, n},
                                                    {"log_softmax_backward", dlp, n}};
                       }});
  return cases;
}

}  // namespace sprig::parity
