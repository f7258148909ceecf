// tensor/cuda/reduce.cu run on the emulated device against the CPU twins: the tables of
// tests/parity/reduce_cases.h, a sum over 99425 elements (sum_all's one line), and rows of -inf.
// The split team is also run at chosen threads per line (1, 2, 8 and a block's most) on ragged
// lengths and line counts that are not a multiple of 32, with ties across threads for argmax and
// lines of -inf and NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/cuda/reduce.cu"  // compiled against tests/kernel_emu/device_emu.h
#include "tensor/ops.h"
#include "tests/kernel_emu/emu_test_util.h"
#include "tests/parity/reduce_cases.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::rand_normal;

const std::vector<DType> kDtypes{DType::f32, DType::bf16};

// The launchers at `split` threads per line of a non-last dim, or (kRule) through the public entry
// points, at the threads threads_per_line picks.
constexpr int kRule = 0;

Tensor emulated_reduce(ReduceOp op, const Tensor& x, int64_t dim, const Tensor& cpu_result,
                       int split = kRule) {
  const Tensor out = emu::nan_like(cpu_result);
  if (split == kRule)
    cuda::reduce(op, x, out, dim, nullptr);
  else
    cuda::run_reduce(op, x, out, dim, split, nullptr);
  return out;
}

Tensor emulated_argmax(const Tensor& x, int64_t dim, const Tensor& cpu_result, int split = kRule) {
  const Tensor out = Tensor::full(cpu_result.shape(), -1, DType::i64);  // no index is -1
  if (split == kRule)
    cuda::argmax(x, out, dim, nullptr);
  else
    cuda::run_argmax(x, out, dim, split, nullptr);
  return out;
}

Tensor emulated_softmax(const Tensor& x, int64_t dim, bool log, int split = kRule) {
  const Tensor y = emu::nan_like(x);
  if (split == kRule)
    cuda::softmax(x, y, dim, log, nullptr);
  else
    cuda::run_softmax(x, y, dim, log, split, nullptr);
  return y;
}

Tensor emulated_softmax_backward(const Tensor& y, const Tensor& dy, int64_t dim, bool log,
                                 int split = kRule) {
  const Tensor dx = emu::nan_like(dy);
  if (split == kRule)
    cuda::softmax_backward(y, dy, dx, dim, log, nullptr);
  else
    cuda::run_softmax_backward(y, dy, dx, dim, log, split, nullptr);
  return dx;
}

// Threads per line of a reduction of `shape` over `dim`, as the public launchers pick them.
int rule(const Shape& shape, int64_t dim) {
  return cuda::threads_per_line(cuda::lines_of(shape, dim));
}

// The threads per line the split tests run on `lines` lines: 1 (the thread team), 2, 8 and the
// most a block holds (32 lines of 32 threads, or 4 lines of 256 for 3 lines).
std::vector<int> splits_for(int64_t lines) { return {1, 2, 8, 1024 / cuda::split_lanes(lines)}; }

SPRIG_EMU_PARITY_TEST(ReduceEmu, ReductionsAndArgmaxMatchTheCpuTwin, parity::reduce_cases())

TEST(ReduceEmu, SumOfOneLongLineMatchesTheCpuTwin) {
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = rand_normal({97 * 1025}, 3, dtype), s = sum(x, 0);
    EXPECT_EMU_PARITY(emulated_reduce(ReduceOp::sum, x, 0, s), s, x.numel());
  }
}

SPRIG_EMU_PARITY_TEST(ReduceEmu, SoftmaxAndBackwardMatchTheCpuTwin, parity::softmax_cases())

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

// The rule of reduce.cu's header comment: a thread per line when the lines fill the GPU or are
// short, else threads doubling up to a block of 1024 while each keeps 16 elements.
TEST(ReduceEmu, ThreadsPerLineRule) {
  EXPECT_EQ(rule({100000, 4}, 0), 256);      // 4 lines (a block of 4 x 256)
  EXPECT_EQ(rule({4096, 64}, 0), 32);        // 64 lines: two blocks of 32 x 32
  EXPECT_EQ(rule({16384, 4096}, 0), 32);     // 4096 lines: 128 blocks of 32 x 32
  EXPECT_EQ(rule({64, 131072}, 0), 2);       // 2^17 lines need 2 threads each for 2^18 threads
  EXPECT_EQ(rule({64, 262144}, 0), 1);       // 2^18 lines fill the GPU alone
  EXPECT_EQ(rule({31, 17}, 0), 1);           // lines of 31: under 2 x 16 elements
  EXPECT_EQ(rule({32, 17}, 0), 2);           // lines of 32: 2 threads of 16
  EXPECT_EQ(rule({3, 97, 33}, 1), 4);        // 99 lines of 97: 4 threads of >= 16 (8 would be 12)
  EXPECT_EQ(rule({1025, 300}, 0), 32);       // capped by the block: 32 lines x 32 threads
  EXPECT_EQ(rule({2, 1 << 20, 3}, 1), 128);  // 6 lines (a block of 8 x 128): 2^13 elements each
  EXPECT_EQ(cuda::split_lanes(3), 4);
  EXPECT_EQ(cuda::split_lanes(33), 32);
  // A split that would not fit a block is refused.
  const Tensor x = Tensor::zeros({40, 33}), out = Tensor::zeros({33});
  EXPECT_THROW(cuda::run_reduce(ReduceOp::sum, x, out, 0, 64, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::run_reduce(ReduceOp::sum, x, out, 0, 3, nullptr), std::invalid_argument);
}

// Non-last dims at chosen threads per line: lengths 37 and 203 (no split divides them; 37 leaves
// the threads past it without elements at 256 per line), 3 lines (a block of 4 lanes, one idle),
// 45 (a full block and one of 13 lines) and the middle dim of [2, 75, 5] (10 lines over two outer
// indices in one block).
TEST(ReduceEmu, SplitLinesMatchTheCpuTwin) {
  struct SplitCase {
    Shape shape;
    int64_t dim;
  };
  const std::vector<SplitCase> shapes{
      {{37, 3}, 0}, {{203, 3}, 0}, {{203, 45}, 0}, {{37, 45}, 0}, {{2, 75, 5}, 1}};
  uint64_t seed = 700;
  for (DType dtype : kDtypes)
    for (const SplitCase& c : shapes) {
      const int64_t n = c.shape[static_cast<size_t>(c.dim)];
      const int64_t lines = Tensor::zeros(c.shape).numel() / n;
      const Tensor x = mul(rand_normal(c.shape, ++seed, dtype), 3.0);
      const Tensor dy = rand_normal(c.shape, ++seed, dtype);
      const Tensor s = sum(x, c.dim), m = mean(x, c.dim), top = max(x, c.dim);
      const Tensor lse = logsumexp(x, c.dim), idx = argmax(x, c.dim);
      const Tensor p = softmax(x, c.dim), lp = log_softmax(x, c.dim);
      for (int split : splits_for(lines)) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " " + shape_str(c.shape) + " dim " +
                     std::to_string(c.dim) + " split " + std::to_string(split));
        EXPECT_EMU_PARITY(emulated_reduce(ReduceOp::sum, x, c.dim, s, split), s, n);
        EXPECT_EMU_PARITY(emulated_reduce(ReduceOp::mean, x, c.dim, m, split), m, n);
        EXPECT_EMU_PARITY(emulated_reduce(ReduceOp::max, x, c.dim, top, split), top, n);
        EXPECT_EMU_PARITY(emulated_reduce(ReduceOp::logsumexp, x, c.dim, lse, split), lse, n);
        EXPECT_EQ(emulated_argmax(x, c.dim, idx, split).to_vector<int64_t>(),
                  idx.to_vector<int64_t>());
        EXPECT_EMU_PARITY(emulated_softmax(x, c.dim, false, split), p, n);
        EXPECT_EMU_PARITY(emulated_softmax(x, c.dim, true, split), lp, n);
        EXPECT_EMU_PARITY(emulated_softmax_backward(p, dy, c.dim, false, split),
                          softmax_backward(p, dy, c.dim), n);
        EXPECT_EMU_PARITY(emulated_softmax_backward(lp, dy, c.dim, true, split),
                          log_softmax_backward(lp, dy, c.dim), n);
      }
    }
}

// The split sums are deterministic: the same input gives the same bits, launch after launch.
TEST(ReduceEmu, SplitSumsRepeatBitwise) {
  const Tensor x = rand_normal({203, 45}, 9, DType::f32);
  const Tensor s = sum(x, 0);
  const std::vector<float> first = emulated_reduce(ReduceOp::sum, x, 0, s, 8).to_vector<float>();
  for (int run = 0; run < 2; ++run)
    EXPECT_EQ(emulated_reduce(ReduceOp::sum, x, 0, s, 8).to_vector<float>(), first);
}

// Column c of [n, lines] holds its maximum 3 at rows first = split - 1 - c % 2 (the last threads of
// the first round; warps 30 and 31 of a block of 32 lines), split + c % 3 (threads 0-2 of the
// second round) and n - 1 (all three clamped below n, in that order), over values below 3 and a NaN
// in row 0: several threads and warps hold a maximum, and the first row wins, not the first thread.
TEST(ReduceEmu, SplitArgmaxTiesAcrossThreadsGiveTheFirst) {
  constexpr int64_t n = 203;
  for (DType dtype : kDtypes)
    for (int64_t lines : {3, 45})
      for (int split : splits_for(lines)) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " lines " + std::to_string(lines) +
                     " split " + std::to_string(split));
        std::vector<float> v(n * lines);
        for (int64_t i = 0; i < n * lines; ++i) v[i] = 0.25f * static_cast<float>(i % 9) - 1.f;
        std::vector<int64_t> expect(lines);
        for (int64_t c = 0; c < lines; ++c) {
          const int64_t first = std::clamp<int64_t>(split - 1 - c % 2, 0, n - 3);
          const int64_t second = std::min<int64_t>(split + c % 3, n - 2);
          for (int64_t r : {first, second, n - 1}) v[r * lines + c] = 3.f;
          if (first != 0) v[c] = NAN;
          expect[c] = first;
        }
        const Tensor x = Tensor::from_vector(v, {n, lines}, dtype), idx = argmax(x, 0);
        ASSERT_EQ(idx.to_vector<int64_t>(), expect);  // the CPU twin agrees
        EXPECT_EQ(emulated_argmax(x, 0, idx, split).to_vector<int64_t>(), expect);
        const Tensor top = max(x, 0);
        EXPECT_TRUE(all_close(emulated_reduce(ReduceOp::max, x, 0, top, split), top, 0));
      }
}

// Columns of [n, 37] over dim 0: column 0 all -inf, column 1 all -inf but a NaN, column 2 -inf but
// in its last row, column 3 a +inf in row 1, the others random with a -inf in row 0. The -inf lines
// give logsumexp -inf, max -inf, argmax 0, softmax 0 and log_softmax -inf exactly; the +inf line
// logsumexp and max +inf.
TEST(ReduceEmu, SplitLinesOfNegativeInfinity) {
  constexpr int64_t lines = 37;
  for (DType dtype : kDtypes)
    for (int64_t n : {37, 203})
      for (int split : {2, 8, 32}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + " n " + std::to_string(n) + " split " +
                     std::to_string(split));
        std::vector<float> v = rand_normal({n, lines}, 11, DType::f32).to_vector<float>();
        for (int64_t r = 0; r < n; ++r) {
          v[r * lines + 0] = v[r * lines + 1] = -INFINITY;
          if (r < n - 1) v[r * lines + 2] = -INFINITY;
        }
        v[(n / 2) * lines + 1] = NAN;
        v[lines + 3] = INFINITY;
        for (int64_t c = 3; c < lines; ++c) v[c] = -INFINITY;
        const Tensor x = Tensor::from_vector(v, {n, lines}, dtype);
        const Tensor lse = logsumexp(x, 0), top = max(x, 0), idx = argmax(x, 0);
        const Tensor e_lse = emulated_reduce(ReduceOp::logsumexp, x, 0, lse, split);
        const std::vector<double> lse_v = e_lse.to_vector<double>();
        const std::vector<double> top_v =
            emulated_reduce(ReduceOp::max, x, 0, top, split).to_vector<double>();
        const std::vector<int64_t> idx_v = emulated_argmax(x, 0, idx, split).to_vector<int64_t>();
        for (int c : {0, 1}) {
          EXPECT_EQ(lse_v[c], -INFINITY) << c;
          EXPECT_EQ(top_v[c], -INFINITY) << c;
          EXPECT_EQ(idx_v[c], 0) << c;
        }
        EXPECT_EQ(idx_v[2], n - 1);
        EXPECT_EQ(lse_v[3], INFINITY);
        EXPECT_EQ(top_v[3], INFINITY);
        EXPECT_EQ(idx_v[3], 1);
        EXPECT_EQ(idx_v, idx.to_vector<int64_t>());
        EXPECT_EMU_PARITY(e_lse, lse, n);
        const Tensor p = emulated_softmax(x, 0, false, split);
        const Tensor lp = emulated_softmax(x, 0, true, split);
        for (int64_t c : {0, 1}) {
          EXPECT_TRUE(all_close(p.select(1, c), Tensor::zeros({n}, dtype), 0)) << c;
          EXPECT_TRUE(all_close(lp.select(1, c), Tensor::full({n}, -INFINITY, dtype), 0)) << c;
        }
        EXPECT_EMU_PARITY(p, softmax(x, 0), n);
        EXPECT_EMU_PARITY(lp, log_softmax(x, 0), n);
      }
}

}  // namespace
}  // namespace sprig
