// GPU parity of swiglu (the table of tests/parity/swiglu_cases.h) and its mixed-device error.
#include <gtest/gtest.h>

#include "tensor/ops.h"
#include "tests/parity/swiglu_cases.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::throws_invalid;
using testing::to_cuda;

SPRIG_GPU_PARITY_TEST(SwigluGpu, MatchesCpu, parity::swiglu_cases())

TEST(SwigluGpu, RejectsMixedDevices) {
  SPRIG_REQUIRE_CUDA();
  const Tensor x = Tensor::ones({2, 4});
  EXPECT_TRUE(
      throws_invalid([&] { swiglu(x, to_cuda(x)); }, "[swiglu] tensors are on different devices"));
}

}  // namespace
}  // namespace sprig
