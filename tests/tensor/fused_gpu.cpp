// GPU parity tests of the fused transformer ops: RMSNorm, rotary embedding and SwiGLU, forward
// and backward, CUDA against the CPU reference in f32 and bf16 on awkward shapes (scalar and
// 16-byte vector paths), non-contiguous inputs, and mixed-device errors.
#include <gtest/gtest.h>

#include "tensor/ops.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::non_contiguous;
using testing::rand_normal;
using testing::rand_uniform;
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

TEST(RopeGpu, MatchesCpu) {
  SPRIG_REQUIRE_CUDA();
  uint64_t seed = 200;
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t D : {64, 128})
      for (DType pos_dt : {DType::i64, DType::i32}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " D=" + std::to_string(D));
        const Tensor x = rand_normal({2, 17, 3, D}, ++seed, dt);
        const Tensor pos = rand_uniform({2, 17}, 0, 32768, ++seed).to(pos_dt);
        const Tensor y = rope(x, pos, 1e6), dx = rope_backward(x, pos, 1e6);
        // x1 cos - x2 sin: two terms of size up to |x| ~ 2 that can cancel.
        EXPECT_PARITY(rope(to_cuda(x), to_cuda(pos), 1e6), y, 2, 2.0);
        EXPECT_PARITY(rope_backward(to_cuda(x), to_cuda(pos), 1e6), dx, 2, 2.0);
        EXPECT_PARITY(rope(non_contiguous(to_cuda(x)), to_cuda(pos), 1e6), y, 2, 2.0);
      }
}

TEST(RopeGpu, PositionZeroIsIdentity) {
  SPRIG_REQUIRE_CUDA();
  const Tensor x = to_cuda(rand_normal({1, 5, 2, 128}, 250, DType::bf16));
  EXPECT_TRUE(all_close(rope(x, to_cuda(Tensor::zeros({1, 5}, DType::i32)), 1e4), x, 0.0));
}

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

TEST(FusedGpu, RejectsMixedDevices) {
  SPRIG_REQUIRE_CUDA();
  const Tensor x = Tensor::ones({2, 4}), w = Tensor::ones({4});
  EXPECT_TRUE(throws_invalid([&] { rms_norm(x, to_cuda(w), 1e-6); },
                             "[rms_norm] tensors are on different devices"));
  EXPECT_TRUE(throws_invalid(
      [&] { rope(to_cuda(Tensor::ones({1, 2, 1, 4})), Tensor::zeros({1, 2}, DType::i64), 1e4); },
      "[rope] tensors are on different devices"));
  EXPECT_TRUE(throws_invalid([&] { swiglu(x, to_cuda(x)); },
                             "[swiglu] tensors are on different devices"));
}

}  // namespace
}  // namespace sprig
