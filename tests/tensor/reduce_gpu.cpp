// GPU parity of reductions and softmax: sum, mean, max, argmax, logsumexp, sum_all, softmax and
// log_softmax with every backward, on CUDA against the CPU reference, in f32 and bf16, on awkward
// shapes, over the last dim (a block per row) and other dims (a thread per line), with
// non-contiguous inputs and rows of -inf.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tensor/ops.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::non_contiguous;
using testing::rand_normal;

const Device kGpu = Device::cuda();
const std::vector<DType> kDtypes{DType::f32, DType::bf16};
const std::vector<int64_t> kSizes{1, 17, 31, 33, 97, 1025};

std::string trace(DType dtype, const Shape& shape, int64_t dim) {
  return std::string(dtype_name(dtype)) + " " + shape_str(shape) + " dim " + std::to_string(dim);
}

// Every (rows, cols) pair of awkward sizes, reduced over the rows (thread per line) and over the
// columns (block per row), plus the middle dim of a 3-D tensor.
struct Case {
  Shape shape;
  int64_t dim;
};
std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t rows : kSizes)
    for (int64_t cols : kSizes)
      for (int64_t dim : {0, 1}) out.push_back({{rows, cols}, dim});
  out.push_back({{3, 97, 33}, 1});
  return out;
}

TEST(ReduceGpu, ReductionsAndBackwardMatchCpu) {
  SPRIG_REQUIRE_CUDA();
  for (DType dtype : kDtypes) {
    for (const Case& c : cases()) {
      SCOPED_TRACE(trace(dtype, c.shape, c.dim));
      const int64_t n = c.shape[static_cast<size_t>(c.dim)];  // terms per reduced element
      const Tensor x = rand_normal(c.shape, 1, dtype), xg = x.to(kGpu);
      const Tensor xs = non_contiguous(xg);
      EXPECT_PARITY(sum(xg, c.dim), sum(x, c.dim), n);
      EXPECT_PARITY(mean(xs, c.dim), mean(x, c.dim), n);
      EXPECT_PARITY(max(xs, c.dim), max(x, c.dim), n);
      EXPECT_PARITY(logsumexp(xg, c.dim, true), logsumexp(x, c.dim, true), n);
      // Both devices see the same values, so the first maximum is the same element.
      const Tensor idx = argmax(x, c.dim);
      EXPECT_EQ(argmax(xs, c.dim).to_vector<int64_t>(), idx.to_vector<int64_t>());

      const Tensor dy = rand_normal(idx.shape(), 2, dtype), dyg = dy.to(kGpu);
      EXPECT_PARITY(sum_backward(dyg, c.shape, c.dim, false),
                    sum_backward(dy, c.shape, c.dim, false));
      EXPECT_PARITY(mean_backward(dyg, c.shape, c.dim, false),
                    mean_backward(dy, c.shape, c.dim, false));
      EXPECT_PARITY(max_backward(dyg, xg, idx.to(kGpu), c.dim, false),
                    max_backward(dy, x, idx, c.dim, false));
      const Tensor y = logsumexp(x, c.dim);
      EXPECT_PARITY(logsumexp_backward(dyg, xg, y.to(kGpu), c.dim, false),
                    logsumexp_backward(dy, x, y, c.dim, false));
    }
  }
}

TEST(ReduceGpu, SumAllMatchesCpu) {
  SPRIG_REQUIRE_CUDA();
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = rand_normal({97, 1025}, 3, dtype);
    const Tensor s = sum_all(x.to(kGpu));
    EXPECT_EQ(s.dim(), 0);
    EXPECT_PARITY(s, sum_all(x), x.numel());
  }
}

TEST(ReduceGpu, SoftmaxAndBackwardMatchCpu) {
  SPRIG_REQUIRE_CUDA();
  for (DType dtype : kDtypes) {
    for (const Case& c : cases()) {
      SCOPED_TRACE(trace(dtype, c.shape, c.dim));
      const int64_t n = c.shape[static_cast<size_t>(c.dim)];  // terms of each normalisation
      const Tensor x = mul(rand_normal(c.shape, 4, dtype), 3.0), xg = x.to(kGpu);
      const Tensor dy = rand_normal(c.shape, 5, dtype), dyg = dy.to(kGpu);
      const Tensor p = softmax(x, c.dim), lp = log_softmax(x, c.dim);
      EXPECT_PARITY(softmax(non_contiguous(xg), c.dim), p, n);
      EXPECT_PARITY(log_softmax(xg, c.dim), lp, n);
      EXPECT_PARITY(softmax_backward(p.to(kGpu), non_contiguous(dyg), c.dim),
                    softmax_backward(p, dy, c.dim), n);
      EXPECT_PARITY(log_softmax_backward(lp.to(kGpu), dyg, c.dim),
                    log_softmax_backward(lp, dy, c.dim), n);
    }
  }
}

TEST(ReduceGpu, RowsOfNegativeInfinity) {
  SPRIG_REQUIRE_CUDA();
  for (DType dtype : kDtypes) {
    for (int64_t n : {17, 1025}) {
      SCOPED_TRACE(trace(dtype, {2, n}, 1));
      // Row 0 all -inf, row 1 finite but for its first element.
      std::vector<float> v(2 * n, -INFINITY);
      for (int64_t k = 1; k < n; ++k) v[n + k] = 0.25f * static_cast<float>(k % 7);
      const Tensor x = Tensor::from_vector(v, {2, n}, dtype), xg = x.to(kGpu);
      const std::vector<double> lse = logsumexp(xg, 1).to_vector<double>();
      EXPECT_EQ(lse[0], -INFINITY);
      EXPECT_PARITY(logsumexp(xg, 1), logsumexp(x, 1), n);
      EXPECT_EQ(argmax(xg, 1).to_vector<int64_t>(), argmax(x, 1).to_vector<int64_t>());
      const Tensor p = softmax(xg, 1), lp = log_softmax(xg, 1);
      EXPECT_TRUE(all_close(p.select(0, 0), Tensor::zeros({n}), 0));
      EXPECT_TRUE(all_close(lp.select(0, 0), Tensor::full({n}, -INFINITY), 0));
      EXPECT_PARITY(p, softmax(x, 1), n);
      EXPECT_PARITY(lp, log_softmax(x, 1), n);
      // Over dim 0 (a thread per column) the first column is all -inf.
      EXPECT_PARITY(softmax(xg.t().contiguous(), 0), softmax(x.t().contiguous(), 0), n);
    }
  }
}

}  // namespace
}  // namespace sprig
