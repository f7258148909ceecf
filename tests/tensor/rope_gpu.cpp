// GPU parity of rope and rope_backward (the table of tests/parity/rope_cases.h), position 0 as the
// exact identity, the mixed-device error.
#include <gtest/gtest.h>

#include "tensor/ops.h"
#include "tests/parity/rope_cases.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::rand_normal;
using testing::throws_invalid;
using testing::to_cuda;

SPRIG_GPU_PARITY_TEST(RopeGpu, MatchesCpu, parity::rope_cases())

TEST(RopeGpu, PositionZeroIsIdentity) {
  SPRIG_REQUIRE_CUDA();
  const Tensor x = to_cuda(rand_normal({1, 5, 2, 128}, 250, DType::bf16));
  EXPECT_TRUE(all_close(
      rope(x, to_cuda(Tensor::zeros({1, 5}, DType::i32)), rope_frequencies(128, 1e4)), x, 0.0));
}

TEST(RopeGpu, RejectsMixedDevices) {
  SPRIG_REQUIRE_CUDA();
  EXPECT_TRUE(throws_invalid(
      [&] {
        rope(to_cuda(Tensor::ones({1, 2, 1, 4})), Tensor::zeros({1, 2}, DType::i64),
             rope_frequencies(4, 1e4));
      },
      "[rope] tensors are on different devices"));
}

}  // namespace
}  // namespace sprig
