// tensor/cuda/reduce.cu run on the emulated device against the CPU twins, under the GPU tests'
// parity rule, in f32 and bf16: sum, mean, max, logsumexp and argmax, softmax and log_softmax with
// their backward, over the last dim (a block per line) and other dims (a thread per line), a sum
// over 99425 elements (sum_all's one line), and rows of -inf. The shapes are those of
// tests/tensor/reduce_gpu.cpp thinned out: every awkward reduced length, but on few lines, as the
// GPU test's every (rows, cols) pair would emulate about a million threads per kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tensor/cuda/reduce.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tensor/ops.h"
#include "tests/kernel_emu/emu_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::rand_normal;

const std::vector<DType> kDtypes{DType::f32, DType::bf16};
const std::vector<int64_t> kSizes{1, 17, 31, 33, 97, 1025};

struct Case {
  Shape shape;
  int64_t dim;
};

std::string trace(DType dtype, const Case& c) {
  return std::string(dtype_name(dtype)) + " " + shape_str(c.shape) + " dim " +
         std::to_string(c.dim);
}

// Each reduced length n in kSizes over the last dim (one warp for n <= 32, up to 16 warps that
// loop for n = 1025) on 1 and 17 lines, and over dim 0 on 1, 17 and 300 lines (300: two blocks of
// threads, the second ragged); plus the middle dim of a 3-D tensor.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t n : kSizes) {
    for (int64_t lines : {1, 17}) out.push_back({{lines, n}, 1});
    for (int64_t lines : {1, 17, 300}) out.push_back({{n, lines}, 0});
  }
  out.push_back({{3, 97, 33}, 1});
  return out;
}

Tensor emulated_reduce(ReduceOp op, const Tensor& x, int64_t dim, const Tensor& cpu_result) {
  const Tensor out = emu::nan_like(cpu_result);
  cuda::reduce(op, x, out, dim, nullptr);
  return out;
}

Tensor emulated_argmax(const Tensor& x, int64_t dim, const Tensor& cpu_result) {
  const Tensor out = Tensor::full(cpu_result.shape(), -1, DType::i64);  // no index is -1
  cuda::argmax(x, out, dim, nullptr);
  return out;
}

Tensor emulated_softmax(const Tensor& x, int64_t dim, bool log) {
  const Tensor y = emu::nan_like(x);
  cuda::softmax(x, y, dim, log, nullptr);
  return y;
}

Tensor emulated_softmax_backward(const Tensor& y, const Tensor& dy, int64_t dim, bool log) {
  const Tensor dx = emu::nan_like(dy);
  cuda::softmax_backward(y, dy, dx, dim, log, nullptr);
  return dx;
}

TEST(ReduceEmu, ReductionsAndArgmaxMatchTheCpuTwin) {
  for (DType dtype : kDtypes)
    for (const Case& c : cases()) {
      SCOPED_TRACE(trace(dtype, c));
      const int64_t n = c.shape[static_cast<size_t>(c.dim)];  // terms per reduced element
      const Tensor x = rand_normal(c.shape, 1, dtype);
      const Tensor s = sum(x, c.dim), m = mean(x, c.dim), top = max(x, c.dim);
      const Tensor lse = logsumexp(x, c.dim), idx = argmax(x, c.dim);
      EXPECT_EMU_PARITY(emulated_reduce(ReduceOp::sum, x, c.dim, s), s, n);
      EXPECT_EMU_PARITY(emulated_reduce(ReduceOp::mean, x, c.dim, m), m, n);
      EXPECT_EMU_PARITY(emulated_reduce(ReduceOp::max, x, c.dim, top), top, n);
      EXPECT_EMU_PARITY(emulated_reduce(ReduceOp::logsumexp, x, c.dim, lse), lse, n);
      // Both see the same values, so the first maximum is the same element.
      EXPECT_EQ(emulated_argmax(x, c.dim, idx).to_vector<int64_t>(), idx.to_vector<int64_t>());
    }
}

TEST(ReduceEmu, SumOfOneLongLineMatchesTheCpuTwin) {
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = rand_normal({97 * 1025}, 3, dtype), s = sum(x, 0);
    EXPECT_EMU_PARITY(emulated_reduce(ReduceOp::sum, x, 0, s), s, x.numel());
  }
}

TEST(ReduceEmu, SoftmaxAndBackwardMatchTheCpuTwin) {
  for (DType dtype : kDtypes)
    for (const Case& c : cases()) {
      SCOPED_TRACE(trace(dtype, c));
      const int64_t n = c.shape[static_cast<size_t>(c.dim)];  // terms of each normalisation
      const Tensor x = mul(rand_normal(c.shape, 4, dtype), 3.0);
      const Tensor dy = rand_normal(c.shape, 5, dtype);
      const Tensor p = softmax(x, c.dim), lp = log_softmax(x, c.dim);
      EXPECT_EMU_PARITY(emulated_softmax(x, c.dim, false), p, n);
      EXPECT_EMU_PARITY(emulated_softmax(x, c.dim, true), lp, n);
      EXPECT_EMU_PARITY(emulated_softmax_backward(p, dy, c.dim, false),
                        softmax_backward(p, dy, c.dim), n);
      EXPECT_EMU_PARITY(emulated_softmax_backward(lp, dy, c.dim, true),
                        log_softmax_backward(lp, dy, c.dim), n);
    }
}

TEST(ReduceEmu, RowsOfNegativeInfinity) {
  for (DType dtype : kDtypes)
    for (int64_t n : {17, 1025}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " n=" + std::to_string(n));
      // Row 0 all -inf, row 1 finite but for its first element.
      std::vector<float> v(2 * n, -INFINITY);
      for (int64_t k = 1; k < n; ++k) v[n + k] = 0.25f * static_cast<float>(k % 7);
      const Tensor x = Tensor::from_vector(v, {2, n}, dtype);
      const Tensor lse = logsumexp(x, 1);
      const Tensor emulated_lse = emulated_reduce(ReduceOp::logsumexp, x, 1, lse);
      EXPECT_EQ(emulated_lse.to_vector<double>()[0], -INFINITY);
      EXPECT_EMU_PARITY(emulated_lse, lse, n);
      const Tensor top = max(x, 1), idx = argmax(x, 1);
      EXPECT_EMU_PARITY(emulated_reduce(ReduceOp::max, x, 1, top), top, n);
      EXPECT_EQ(emulated_argmax(x, 1, idx).to_vector<int64_t>(), idx.to_vector<int64_t>());
      const Tensor p = emulated_softmax(x, 1, false), lp = emulated_softmax(x, 1, true);
      EXPECT_TRUE(all_close(p.select(0, 0), Tensor::zeros({n}, dtype), 0));
      EXPECT_TRUE(all_close(lp.select(0, 0), Tensor::full({n}, -INFINITY, dtype), 0));
      EXPECT_EMU_PARITY(p, softmax(x, 1), n);
      EXPECT_EMU_PARITY(lp, log_softmax(x, 1), n);
      // Over dim 0 (a thread per column) the first column is all -inf.
      const Tensor xt = x.t().contiguous();
      EXPECT_EMU_PARITY(emulated_softmax(xt, 0, false), softmax(xt, 0), n);
      EXPECT_EMU_PARITY(emulated_softmax(xt, 0, true), log_softmax(xt, 0), n);
    }
}

}  // namespace
}  // namespace sprig
