// CUDA parity of matmul (cuBLASLt) against the CPU (Eigen): the tables of
// tests/parity/matmul_cases.h (every flag and shape, the backward), strided and misaligned
// operands, the kernel's accumulation, matmul_into, an empty inner dimension.
#include <gtest/gtest.h>

#include <cmath>

#include "tensor/cuda/kernels.h"
#include "tensor/ops.h"
#include "tests/parity/index_cases.h"
#include "tests/parity/matmul_cases.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using parity::offset_copy;
using testing::all_close;

const Device kCuda = Device::cuda();

SPRIG_GPU_PARITY_TEST(MatmulGpu, MatchesCpuForAllFlagsAndShapes, parity::matmul_cases())

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

SPRIG_GPU_PARITY_TEST(MatmulGpu, BackwardMatchesCpu, parity::matmul_backward_cases())

}  // namespace
}  // namespace sprig
