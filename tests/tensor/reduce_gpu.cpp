// GPU parity of reductions and softmax (the tables of tests/parity/reduce_cases.h), sum_all, and
// rows of -inf.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tensor/ops.h"
#include "tests/parity/reduce_cases.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::rand_normal;

const Device kGpu = Device::cuda();
const std::vector<DType> kDtypes{DType::f32, DType::bf16};

std::string trace(DType dtype, const Shape& shape, int64_t dim) {
  return std::string(dtype_name(dtype)) + " " + shape_str(shape) + " dim " + std::to_string(dim);
}

SPRIG_GPU_PARITY_TEST(ReduceGpu, ReductionsAndBackwardMatchCpu, parity::reduce_cases())

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

SPRIG_GPU_PARITY_TEST(ReduceGpu, SoftmaxAndBackwardMatchCpu, parity::softmax_cases())

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
