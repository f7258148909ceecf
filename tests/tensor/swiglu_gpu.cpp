// GPU parity of swiglu, forward and backward, CUDA against the CPU twin in f32 and bf16 on
// awkward shapes (scalar and 16-byte vector paths), non-contiguous inputs, mixed-device errors.
#include <gtest/gtest.h>

#include <string>

#include "tensor/ops.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::non_contiguous;
using testing::rand_normal;
using testing::throws_invalid;
using testing::to_cuda;

TEST(SwigluGpu, MatchesCpu) {
  SPRIG_REQUIRE_CUDA();
  uint64_t seed = 300;
  for (DType dt : {DType::f32, DType::bf16})
    for (const Shape& shape : {Shape{1}, Shape{17, 33}, Shape{97, 1024}, Shape{1025, 31}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + shape_str(shape));
      const Tensor gate = rand_normal(shape, ++seed, dt), up = rand_normal(shape, ++seed, dt);
      const Tensor dout = rand_normal(shape, ++seed, dt);
      EXPECT_PARITY(swiglu(to_cuda(gate), to_cuda(up)), swiglu(gate, up));
      const auto [dgate, dup] = swiglu_backward(gate, up, dout);
      const auto [gdgate, gdup] = swiglu_backward(to_cuda(gate), to_cuda(up), to_cuda(dout));
      EXPECT_PARITY(gdgate, dgate);
      EXPECT_PARITY(gdup, dup);
    }
}

TEST(SwigluGpu, NonContiguousInputs) {
  SPRIG_REQUIRE_CUDA();
  const Tensor gate = rand_normal({33, 8}, 350), up = rand_normal({33, 8}, 351);
  EXPECT_PARITY(swiglu(non_contiguous(to_cuda(gate)), non_contiguous(to_cuda(up))),
                swiglu(gate, up));
}

TEST(SwigluGpu, RejectsMixedDevices) {
  SPRIG_REQUIRE_CUDA();
  const Tensor x = Tensor::ones({2, 4});
  EXPECT_TRUE(
      throws_invalid([&] { swiglu(x, to_cuda(x)); }, "[swiglu] tensors are on different devices"));
}

}  // namespace
}  // namespace sprig
