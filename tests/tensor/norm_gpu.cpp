// GPU parity of rms_norm, forward and backward, CUDA against the CPU twin in f32 and bf16 on
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

TEST(RmsNormGpu, MatchesCpuOnAwkwardShapes) {
  SPRIG_REQUIRE_CUDA();
  uint64_t seed = 0;
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t R : {1, 17, 97, 1025})
      for (int64_t H : {31, 33, 1024}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " R=" + std::to_string(R) +
                     " H=" + std::to_string(H));
        const Tensor x = rand_normal({R, H}, ++seed, dt), w = rand_normal({H}, ++seed, dt);
        const Tensor dy = rand_normal({R, H}, ++seed, dt);
        const auto [y, rstd] = rms_norm(x, w, 1e-6);
        const auto [gy, grstd] = rms_norm(to_cuda(x), to_cuda(w), 1e-6);
        EXPECT_PARITY(gy, y);
        EXPECT_PARITY(grstd, rstd, H, 1.0 / static_cast<double>(H));  // a mean of H squares
        // dw accumulates (starts at 1) into f32 and into w's dtype.
        for (DType dw_dt : {DType::f32, dt}) {
          const Tensor dw = Tensor::ones({H}, dw_dt), gdw = to_cuda(dw);
          const Tensor dx = rms_norm_backward(dy, x, w, rstd, dw);
          const Tensor gdx = rms_norm_backward(to_cuda(dy), to_cuda(x), to_cuda(w), grstd, gdw);
          EXPECT_PARITY(gdx, dx, H);  // each row's correction sums over H
          EXPECT_PARITY(gdw, dw, R);  // summed over the R rows
        }
      }
}

TEST(RmsNormGpu, NonContiguousInputAndLeadingDims) {
  SPRIG_REQUIRE_CUDA();
  const Tensor x = rand_normal({6, 5, 64}, 100), w = rand_normal({64}, 101);
  EXPECT_PARITY(rms_norm(non_contiguous(to_cuda(x)), to_cuda(w), 1e-6).first,
                rms_norm(x, w, 1e-6).first);
}

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
