// GPU parity of the elementwise ops: every unary and binary op, binary_scalar, where /
// masked_fill and every backward (the tables of tests/parity/elementwise_cases.h), and the kernels
// in place on strided tensors.
#include <gtest/gtest.h>

#include "tensor/cuda/kernels.h"
#include "tensor/ops.h"
#include "tests/parity/elementwise_cases.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::non_contiguous;
using testing::rand_normal;

SPRIG_GPU_PARITY_TEST(ElementwiseGpu, UnaryAndBackwardMatchCpu, parity::unary_cases())

TEST(ElementwiseGpu, KernelsRunInPlaceOnStridedTensors) {
  SPRIG_REQUIRE_CUDA();
  const Tensor x = rand_normal({33, 17}, 3);
  const Tensor xg = non_contiguous(x.to(Device::cuda()));
  const cudaStream_t stream = cuda::current_stream(0);
  cuda::unary(UnaryOp::tanh, xg, xg, 0.0, stream);
  cuda::binary_scalar(BinaryOp::sub, xg, 2.0, /*scalar_first=*/true, xg, stream);
  EXPECT_PARITY(xg, binary_scalar(BinaryOp::sub, tanh(x), 2.0, true));
}

SPRIG_GPU_PARITY_TEST(ElementwiseGpu, BinaryAndBackwardWithBroadcastMatchCpu,
                      parity::binary_cases())
SPRIG_GPU_PARITY_TEST(ElementwiseGpu, BinaryScalarMatchesCpu, parity::binary_scalar_cases())
SPRIG_GPU_PARITY_TEST(ElementwiseGpu, WhereMaskedFillAndBackwardMatchCpu, parity::where_cases())

}  // namespace
}  // namespace sprig
