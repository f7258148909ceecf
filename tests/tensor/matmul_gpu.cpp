// CUDA parity of matmul (cuBLASLt) and matmul_backward against the CPU (Eigen): all transpose
// combinations, batched and broadcast b, awkward sizes (1, 17, 31, 33, 97, 1025), f32 / bf16 /
// f16 / f64, accumulate, strided and misaligned operands.
#include <gtest/gtest.h>

#include <cmath>

#include "tensor/cuda/kernels.h"
#include "tensor/ops.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;

const Device kCuda = Device::cuda();

// Stored shape of an operand [rows, cols] after op, 2-D when batch is 0.
Shape stored(int64_t batch, int64_t rows, int64_t cols, bool trans) {
  Shape s = trans ? Shape{cols, rows} : Shape{rows, cols};
  if (batch > 0) s.insert(s.begin(), batch);
  return s;
}

// A contiguous copy of x starting one element into a larger buffer (not 16-byte aligned).
Tensor offset_copy(const Tensor& x) {
  Tensor buffer = Tensor::zeros({x.numel() + 1}, x.dtype(), x.device());
  Tensor view = buffer.narrow(0, 1, x.numel()).view(x.shape());
  view.copy_(x);
  return view;
}

struct Dims {
  int64_t m, k, n;
};
const Dims kDims[] = {{1, 1, 1}, {17, 31, 33}, {97, 1025, 17}, {33, 97, 1025}, {1, 1025, 31}};

TEST(MatmulGpu, MatchesCpuForAllFlagsAndShapes) {
  SPRIG_REQUIRE_CUDA();
  uint64_t seed = 500;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (const Dims& d : kDims)
      for (int64_t batch : {int64_t{0}, int64_t{3}})
        for (bool broadcast : {false, true}) {
          if (batch == 0 && broadcast) continue;
          for (bool ta : {false, true})
            for (bool tb : {false, true}) {
              const Tensor a = testing::rand_normal(stored(batch, d.m, d.k, ta), ++seed, dtype);
              const Tensor b =
                  testing::rand_normal(stored(broadcast ? 0 : batch, d.k, d.n, tb), ++seed, dtype);
              const Tensor ref = matmul(a, b, ta, tb);
              EXPECT_PARITY(matmul(a.to(kCuda), b.to(kCuda), ta, tb), ref, d.k)
                  << dtype_name(dtype) << " m " << d.m << " k " << d.k << " n " << d.n << " batch "
                  << batch << " broadcast " << broadcast << " ta " << ta << " tb " << tb;
            }
        }
}

TEST(MatmulGpu, StridedAndMisalignedOperands) {
  SPRIG_REQUIRE_CUDA();
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor a = testing::rand_normal({3, 33, 97}, 600, dtype);
    const Tensor b = testing::rand_normal({3, 97, 31}, 601, dtype);
    const Tensor ref = matmul(a, b);
    const Tensor ga = a.to(kCuda), gb = b.to(kCuda);
    // Misaligned operands; a transposed view (passed as its contiguous source, flag flipped);
    // strided operands (copied to contiguous).
    EXPECT_PARITY(matmul(offset_copy(ga), offset_copy(gb)), ref, 97);
    const Tensor a_view = ga.transpose(1, 2).contiguous().transpose(1, 2);
    EXPECT_PARITY(matmul(a_view, gb), ref, 97);
    const Tensor gb_wide = Tensor::zeros({3, 97, 40}, dtype, kCuda).narrow(2, 5, 31);
    gb_wide.copy_(gb);
    EXPECT_PARITY(matmul(testing::non_contiguous(ga), gb_wide), ref, 97);
  }
}

TEST(MatmulGpu, KernelAccumulates) {
  SPRIG_REQUIRE_CUDA();
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor a = testing::rand_normal({2, 17, 33}, 700, dtype);
    const Tensor b = testing::rand_normal({1, 33, 31}, 701, dtype);
    const Tensor out = testing::rand_normal({2, 17, 31}, 702, dtype);
    const Tensor out_gpu = out.to(kCuda);
    cuda::matmul(a.to(kCuda), b.to(kCuda), out_gpu, false, false, true, cuda::current_stream(0));
    // CPU reference in f32 (the CPU kernel takes f32/f64).
    const Tensor ref = out.to(DType::f32);
    cpu::matmul(a.to(DType::f32), b.to(DType::f32), ref, false, false, true);
    EXPECT_PARITY(out_gpu, ref.to(dtype), 34) << dtype_name(dtype);  // 33 products and out
  }
}

TEST(MatmulGpu, MatmulIntoAccumulatesLikeTheCpu) {
  SPRIG_REQUIRE_CUDA();
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor dy = testing::rand_normal({97, 33}, 710, dtype);
    const Tensor h = testing::rand_normal({97, 31}, 711, dtype);
    const Tensor dw = testing::rand_normal({33, 31}, 712, dtype), dw_gpu = dw.to(kCuda);
    for (int64_t r0 : {0, 40}) {  // two row chunks added into one weight gradient
      matmul_into(dy.narrow(0, r0, r0 ? 57 : 40), h.narrow(0, r0, r0 ? 57 : 40), dw, true, false,
                  true);
      matmul_into(dy.to(kCuda).narrow(0, r0, r0 ? 57 : 40), h.to(kCuda).narrow(0, r0, r0 ? 57 : 40),
                  dw_gpu, true, false, true);
    }
    EXPECT_PARITY(dw_gpu, dw, 98) << dtype_name(dtype);  // 97 products and the start value
  }
}

TEST(MatmulGpu, EmptyInnerDimensionGivesZeros) {
  SPRIG_REQUIRE_CUDA();
  const Tensor out =
      matmul(Tensor::ones({17, 0}, DType::f32, kCuda), Tensor::ones({0, 31}, DType::f32, kCuda));
  EXPECT_TRUE(all_close(out, Tensor::zeros({17, 31}), 0));
}

TEST(MatmulGpu, BackwardMatchesCpu) {
  SPRIG_REQUIRE_CUDA();
  const int64_t B = 3, M = 17, K = 97, N = 33;
  uint64_t seed = 800;
  for (DType dtype : {DType::f32, DType::bf16})
    for (int64_t b_batch : {int64_t{0}, B})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const Tensor a = testing::rand_normal(stored(B, M, K, ta), ++seed, dtype);
          const Tensor b = testing::rand_normal(stored(b_batch, K, N, tb), ++seed, dtype);
          const Tensor dy = testing::rand_normal({B, M, N}, ++seed, dtype);
          const auto [da, db] = matmul_backward(a, b, dy, ta, tb);
          const auto [gda, gdb] = matmul_backward(a.to(kCuda), b.to(kCuda), dy.to(kCuda), ta, tb);
          // db of a broadcast b sums over the batch too: B * M terms.
          EXPECT_PARITY(gda, da, N)
              << dtype_name(dtype) << " b_batch " << b_batch << " ta " << ta << " tb " << tb;
          EXPECT_PARITY(gdb, db, B * M)
              << dtype_name(dtype) << " b_batch " << b_batch << " ta " << ta << " tb " << tb;
        }
}

}  // namespace
}  // namespace sprig
