// GPU parity of rms_norm (the table of tests/parity/norm_cases.h), its backward without features,
// its scratch's stream rule and its mixed-device error.
#include <gtest/gtest.h>

#include "tensor/ops.h"
#include "tests/parity/norm_cases.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::throws_invalid;
using testing::to_cuda;

SPRIG_GPU_PARITY_TEST(RmsNormGpu, MatchesCpuOnAwkwardShapes, parity::rms_norm_cases())

// H == 0 used to size the dw reduction by dividing by the number of column blocks (0).
TEST(RmsNormGpu, BackwardWithoutFeatures) {
  SPRIG_REQUIRE_CUDA();
  const Tensor empty = to_cuda(Tensor::zeros({3, 0}));
  const Tensor dx = rms_norm_backward(empty, empty, to_cuda(Tensor::zeros({0})),
                                      to_cuda(Tensor::ones({3})), to_cuda(Tensor::zeros({0})));
  EXPECT_EQ(dx.shape(), (Shape{3, 0}));
}

// The backward's scratch comes from the allocator, which orders memory on the device's current
// stream: a launch on any other stream (here the legacy default stream) is refused.
TEST(RmsNormGpu, ScratchIsRefusedOnAnotherStream) {
  SPRIG_REQUIRE_CUDA();
  const Tensor x = to_cuda(Tensor::ones({4, 8})), w = to_cuda(Tensor::ones({8}));
  const Tensor rstd = to_cuda(Tensor::ones({4})), dx = to_cuda(Tensor::zeros({4, 8}));
  EXPECT_TRUE(throws_invalid(
      [&] { cuda::rms_norm_backward(x, x, w, rstd, dx, to_cuda(Tensor::zeros({8})), nullptr); },
      "[rms_norm_backward] scratch memory is ordered on cuda::current_stream(0): launch on that "
      "stream"));
}

TEST(RmsNormGpu, RejectsMixedDevices) {
  SPRIG_REQUIRE_CUDA();
  EXPECT_TRUE(throws_invalid(
      [&] {
        rms_norm(Tensor::ones({2, 4}), to_cuda(Tensor::ones({4})), 1e-6);
      },
      "[rms_norm] tensors are on different devices"));
}

}  // namespace
}  // namespace sprig
