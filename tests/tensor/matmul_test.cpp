// CPU tests of matmul, matmul_into and matmul_backward: hand-computed products for the four
// transpose combinations, batched and broadcast-b products against a naive f64 loop, accumulate,
// strided inputs, f64 and bf16, gradients against central differences, and bad-input errors.
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>

#include "tensor/cpu/kernels.h"
#include "tensor/cuda/gemm_plan.h"
#include "tensor/ops.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::invalid_argument_message;

Tensor f32(const std::vector<float>& v, const Shape& shape) {
  return Tensor::from_vector(v, shape);
}

// op(a) @ op(b) by a naive f64 loop; a [M, K] or [B, M, K], b [K, N] or [B, K, N] (before op).
Tensor naive_matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const Tensor a3 = a.dim() == 2 ? a.unsqueeze(0) : a, b3 = b.dim() == 2 ? b.unsqueeze(0) : b;
  const int64_t batch = a3.size(0), m = a3.size(trans_a ? 2 : 1), k = a3.size(trans_a ? 1 : 2);
  const int64_t n = b3.size(trans_b ? 1 : 2);
  const std::vector<double> va = a3.to_vector<double>(), vb = b3.to_vector<double>();
  std::vector<double> out;
  for (int64_t s = 0; s < batch; ++s) {
    const double* pa = va.data() + s * m * k;
    const double* pb = vb.data() + (b3.size(0) == 1 ? 0 : s * k * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc += pa[trans_a ? p * m + i : i * k + p] * pb[trans_b ? j * k + p : p * n + j];
        out.push_back(acc);
      }
  }
  const Shape shape = a.dim() == 3 ? Shape{batch, m, n} : Shape{m, n};
  return Tensor::from_vector(out, shape, DType::f64);
}

// Stored shape of an operand [rows, cols] after op, for batch 0 (2-D) or batch B.
Shape stored(int64_t batch, int64_t rows, int64_t cols, bool trans) {
  Shape s = trans ? Shape{cols, rows} : Shape{rows, cols};
  if (batch > 0) s.insert(s.begin(), batch);
  return s;
}

// ---- values -------------------------------------------------------------------------------------

TEST(Matmul, HandComputedForAllTransposeCombinations) {
  // [[1, 2, 3], [4, 5, 6]] @ [[7, 8], [9, 10], [11, 12]] = [[58, 64], [139, 154]].
  const Tensor a = f32({1, 2, 3, 4, 5, 6}, {2, 3}), b = f32({7, 8, 9, 10, 11, 12}, {3, 2});
  const Tensor at = f32({1, 4, 2, 5, 3, 6}, {3, 2}), bt = f32({7, 9, 11, 8, 10, 12}, {2, 3});
  const Tensor expected = f32({58, 64, 139, 154}, {2, 2});
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor out = matmul(ta ? at : a, tb ? bt : b, ta, tb);
      EXPECT_TRUE(all_close(out, expected, 0)) << "ta " << ta << " tb " << tb;
      // The same product from transposed views (passed to the kernel with flipped flags).
      EXPECT_TRUE(all_close(matmul(ta ? a.t() : at.t(), tb ? b.t() : bt.t(), ta, tb), expected, 0));
    }
}

TEST(Matmul, BatchedAndBroadcastMatchNaiveLoops) {
  const int64_t M = 5, K = 7, N = 4;
  uint64_t seed = 10;
  for (int64_t B : {3, 16})  // 16: the batch loop is split across threads
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool broadcast : {false, true}) {
          const Tensor a = testing::rand_normal(stored(B, M, K, ta), ++seed);
          const Tensor b = testing::rand_normal(stored(broadcast ? 0 : B, K, N, tb), ++seed);
          const Tensor out = matmul(a, b, ta, tb);
          EXPECT_EQ(out.shape(), (Shape{B, M, N}));
          EXPECT_TRUE(all_close(out, naive_matmul(a, b, ta, tb), 1e-5, 1e-5))
              << "ta " << ta << " tb " << tb << " broadcast " << broadcast;
        }
}

TEST(Matmul, StridedInputs) {
  const Tensor a = testing::rand_normal({2, 6, 5}, 20), b = testing::rand_normal({2, 5, 3}, 21);
  const Tensor expected = naive_matmul(a, b, false, false);
  // A transposed copy (flag flipped), a column slice of a wider tensor and a permuted batch
  // (both copied to contiguous).
  const Tensor a_sliced = testing::rand_normal({2, 6, 9}, 22).narrow(2, 2, 5);
  a_sliced.copy_(a);
  const Tensor b_permuted = testing::rand_normal({5, 2, 3}, 23).permute({1, 0, 2});
  b_permuted.copy_(b);
  EXPECT_FALSE(a_sliced.is_contiguous());
  EXPECT_TRUE(all_close(matmul(testing::non_contiguous(a), b), expected, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(matmul(a_sliced, b_permuted), expected, 1e-5, 1e-5));
  EXPECT_TRUE(all_close(matmul(a, testing::non_contiguous(b.select(0, 1))),
                        naive_matmul(a, b.select(0, 1), false, false), 1e-5, 1e-5));
}

TEST(Matmul, F64IsExactToRounding) {
  const Tensor a = testing::rand_normal({4, 33, 17}, 30, DType::f64);
  const Tensor b = testing::rand_normal({4, 31, 33}, 31, DType::f64);
  const Tensor out = matmul(a, b, true, true);
  EXPECT_EQ(out.dtype(), DType::f64);
  EXPECT_TRUE(all_close(out, naive_matmul(a, b, true, true), 1e-12, 1e-12));
}

TEST(Matmul, Bf16MatchesF32WithinBf16Rounding) {
  const Tensor a = testing::rand_normal({2, 9, 64}, 40, DType::bf16);
  const Tensor b = testing::rand_normal({64, 11}, 41, DType::bf16);
  const Tensor out = matmul(a, b);
  EXPECT_EQ(out.dtype(), DType::bf16);
  // Same (bf16-exact) inputs in f32: the only difference is the final rounding to bf16.
  const Tensor ref = matmul(a.to(DType::f32), b.to(DType::f32));
  EXPECT_TRUE(all_close(out, ref, 1e-3, 1.0 / 256));
}

TEST(Matmul, KernelAccumulates) {
  const Tensor a = testing::rand_normal({2, 3, 4}, 50), b = testing::rand_normal({1, 4, 5}, 51);
  const Tensor out = Tensor::full({2, 3, 5}, 1.0);
  cpu::matmul(a, b, out, false, false, true);
  std::vector<double> expected = naive_matmul(a, b.select(0, 0), false, false).to_vector<double>();
  for (double& v : expected) v += 1.0;
  EXPECT_TRUE(all_close(out, Tensor::from_vector(expected, out.shape()), 1e-5, 1e-5));
}

TEST(MatmulInto, WritesOrAccumulatesInPlace) {
  const Tensor a = testing::rand_normal({3, 5}, 21), b = testing::rand_normal({4, 5}, 22);
  const Tensor start = testing::rand_normal({3, 4}, 23);
  Tensor out = start.clone();
  matmul_into(a, b, out, false, true, /*accumulate=*/true);
  EXPECT_TRUE(
      all_close(out, add(start, naive_matmul(a, b, false, true).to(DType::f32)), 1e-5, 1e-5));
  const void* storage = out.data_ptr();
  matmul_into(a, b, out, false, true, false);
  EXPECT_EQ(out.data_ptr(), storage);
  EXPECT_TRUE(all_close(out, naive_matmul(a, b, false, true), 1e-5, 1e-5));
  // A 3-D a over a shared b (one GEMM over the stacked rows), and bf16 (f32 math on the CPU).
  const Tensor a3 = testing::rand_normal({2, 3, 5}, 24);
  Tensor out3 = Tensor::ones({2, 3, 4});
  matmul_into(a3, b, out3, false, true, true);
  EXPECT_TRUE(all_close(out3, add(naive_matmul(a3, b, false, true), 1.0), 1e-5, 1e-5));
  Tensor out_bf = start.to(DType::bf16);
  matmul_into(a.to(DType::bf16), b.to(DType::bf16), out_bf, false, true, true);
  EXPECT_EQ(out_bf.dtype(), DType::bf16);
  const Tensor want =
      add(start.to(DType::bf16).to(DType::f32),
          matmul(a.to(DType::bf16).to(DType::f32), b.to(DType::bf16).to(DType::f32), false, true))
          .to(DType::bf16);
  // The f32 sum rounded once to bf16 (within one bf16 ulp: another CPU's f32 summation order may
  // round the other way).
  EXPECT_TRUE(all_close(out_bf, want, 0, 1.0 / 128));
}

TEST(MatmulInto, RejectsBadOutputs) {
  const Tensor a = Tensor::ones({3, 5}), b = Tensor::ones({5, 4});
  EXPECT_EQ(invalid_argument_message([&] {
              matmul_into(a, b, Tensor::zeros({4, 3}), false, false, false);
            }),
            "[matmul_into] out must have shape [3, 4], got [4, 3]");
  EXPECT_EQ(invalid_argument_message([&] {
              matmul_into(a, b, Tensor::zeros({4, 3}).transpose(0, 1), false, false, false);
            }),
            "[matmul_into] out must be contiguous");
  EXPECT_EQ(invalid_argument_message([&] {
              matmul_into(a, b, Tensor::zeros({3, 4}, DType::f64), false, false, false);
            }),
            "[matmul_into] dtype mismatch: f32 and f64");
}

TEST(Matmul, EmptyInnerDimensionGivesZeros) {
  const Tensor out = matmul(Tensor::ones({2, 0}), Tensor::ones({0, 3}));
  EXPECT_TRUE(all_close(out, Tensor::zeros({2, 3}), 0));
  EXPECT_EQ(matmul(Tensor::ones({2, 0, 4}), Tensor::ones({4, 3})).shape(), (Shape{2, 0, 3}));
}

// ---- backward -----------------------------------------------------------------------------------

// d/dx of sum(f() * w) by central differences, perturbing each element of x in place (f64).
Tensor numeric_grad(const Tensor& x, const Tensor& w, const std::function<Tensor()>& f) {
  return numeric_gradient([&] { return testing::dot(f(), w); }, x);
}

TEST(MatmulBackward, MatchesCentralDifferences) {
  const int64_t B = 2, M = 3, K = 4, N = 5;
  uint64_t seed = 60;
  for (int64_t a_batch : {int64_t{0}, B})
    for (int64_t b_batch : {int64_t{0}, B}) {
      if (a_batch == 0 && b_batch != 0) continue;  // a 2-D a takes a 2-D b only
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const Tensor a = testing::rand_normal(stored(a_batch, M, K, ta), ++seed, DType::f64);
          const Tensor b = testing::rand_normal(stored(b_batch, K, N, tb), ++seed, DType::f64);
          const Tensor w =
              testing::rand_normal(a_batch ? Shape{B, M, N} : Shape{M, N}, ++seed, DType::f64);
          const auto [da, db] = matmul_backward(a, b, w, ta, tb);
          const auto f = [&] { return matmul(a, b, ta, tb); };
          EXPECT_TRUE(all_close(da, numeric_grad(a, w, f), 1e-7, 1e-7))
              << "da: a_batch " << a_batch << " b_batch " << b_batch << " ta " << ta << " tb "
              << tb;
          EXPECT_TRUE(all_close(db, numeric_grad(b, w, f), 1e-7, 1e-7))
              << "db: a_batch " << a_batch << " b_batch " << b_batch << " ta " << ta << " tb "
              << tb;
        }
    }
}

TEST(MatmulBackward, Bf16KeepsDtypeAndMatchesF32) {
  const Tensor a = testing::rand_normal({2, 8, 16}, 70, DType::bf16);
  const Tensor b = testing::rand_normal({16, 8}, 71, DType::bf16);
  const Tensor dy = testing::rand_normal({2, 8, 8}, 72, DType::bf16);
  const auto [da, db] = matmul_backward(a, b, dy, false, false);
  const auto [da32, db32] =
      matmul_backward(a.to(DType::f32), b.to(DType::f32), dy.to(DType::f32), false, false);
  EXPECT_EQ(da.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(da, da32, 1e-3, 1.0 / 256));
  EXPECT_TRUE(all_close(db, db32, 1e-3, 1.0 / 256));
}

// ---- errors -------------------------------------------------------------------------------------

TEST(Matmul, RejectsBadInputs) {
  EXPECT_EQ(invalid_argument_message([] {
              matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
            }),
            "[matmul] inner dimensions differ: a [2, 3] (K=3) and b [4, 5] (K=4)");
  EXPECT_EQ(invalid_argument_message([] {
              matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}), true, true);
            }),
            "[matmul] inner dimensions differ: a [2, 3]^T (K=2) and b [4, 5]^T (K=5)");
  EXPECT_EQ(invalid_argument_message([] {
              matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 4}));
            }),
            "[matmul] batch sizes differ: a [2, 2, 3] and b [3, 3, 4]");
  EXPECT_EQ(invalid_argument_message([] {
              matmul(Tensor::zeros({2, 3}), Tensor::zeros({2, 3, 4}));
            }),
            "[matmul] b [2, 3, 4] is batched but a [2, 3] is not");
  EXPECT_EQ(invalid_argument_message([] {
              matmul(Tensor::zeros({3}), Tensor::zeros({3, 4}));
            }),
            "[matmul] a must have 2 or 3 dimensions, got 1 (shape [3])");
  EXPECT_EQ(invalid_argument_message([] {
              matmul(Tensor::zeros({2, 3}), Tensor::zeros({3, 4}, DType::f64));
            }),
            "[matmul] dtype mismatch: f32 and f64");
  EXPECT_EQ(invalid_argument_message([] {
              matmul(Tensor::zeros({2, 3}, DType::i64), Tensor::zeros({3, 4}, DType::i64));
            }),
            "[matmul] a must be a floating tensor, got i64");
  EXPECT_EQ(invalid_argument_message([] {
              matmul_backward(Tensor::zeros({2, 3}), Tensor::zeros({3, 4}), Tensor::zeros({4, 2}),
                              false, false);
            }),
            "[matmul_backward] dy must have shape [2, 4], got [4, 2]");
}

// cuBLASLt's alignment hint for an operand: the base address, the row pitch and (batched) the
// batch stride all bound it; 256 bytes at most, 256 when all three are multiples of it.
TEST(OperandAlignment, BaseRowPitchAndBatchStride) {
  using cuda::operand_alignment;
  EXPECT_EQ(operand_alignment(0x10000, 4096, 0), 256u);
  EXPECT_EQ(operand_alignment(0x10010, 4096, 0), 16u);  // the base alone
  EXPECT_EQ(operand_alignment(0x10000, 6, 0), 2u);      // rows of 3 bf16: every other row at 2
  EXPECT_EQ(operand_alignment(0x10000, 4096, 24), 8u);  // the second matrix 24 bytes in
  EXPECT_EQ(operand_alignment(0x10000, 1024, 512), 256u);
  EXPECT_EQ(operand_alignment(0, 0, 0), 256u);
}

// Plans are made once per key; any field of the key (here an alignment or the transposes) makes a
// new plan; a failed make() leaves nothing behind; at capacity the cache starts over, while plans
// handed out stay valid.
TEST(GemmPlanCache, OnePlanPerKeyAndBoundedSize) {
  cuda::GemmPlanCache<int> cache(3);
  int made = 0;
  const auto make = [&made] { return ++made; };
  cuda::GemmKey key{.device = 0,
                    .dtype = DType::bf16,
                    .batch = 1,
                    .m = 512,
                    .n = 3072,
                    .k = 1024,
                    .align_a = 256,
                    .align_b = 256,
                    .align_out = 256};
  const auto first = cache.get(key, make);
  EXPECT_EQ(*first, 1);
  EXPECT_EQ(*cache.get(key, make), 1);
  EXPECT_EQ(made, 1);

  cuda::GemmKey misaligned = key;
  misaligned.align_a = 16;
  EXPECT_EQ(*cache.get(misaligned, make), 2);
  cuda::GemmKey transposed = key;
  transposed.trans_b = true;
  EXPECT_EQ(*cache.get(transposed, make), 3);
  EXPECT_EQ(cache.size(), 3u);

  cuda::GemmKey other = key;
  other.k = 1;
  EXPECT_THROW(cache.get(other, []() -> int { throw std::runtime_error("no algorithm"); }),
               std::runtime_error);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(*cache.get(other, make), 4);  // the fourth plan: the cache starts over
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(*first, 1);
  EXPECT_EQ(*cache.get(key, make), 5);
  EXPECT_NE(cuda::GemmKeyHash{}(key), cuda::GemmKeyHash{}(misaligned));
}

}  // namespace
}  // namespace sprig
