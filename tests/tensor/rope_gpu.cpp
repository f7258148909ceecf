// GPU parity of rope and rope_backward, CUDA against the CPU twin in f32 and bf16, i32 and i64
// positions, non-contiguous inputs, mixed-device errors.
#include <gtest/gtest.h>

#include <string>

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

TEST(RopeGpu, MatchesCpu) {
  SPRIG_REQUIRE_CUDA();
  uint64_t seed = 200;
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t D : {64, 128})
      for (DType pos_dt : {DType::i64, DType::i32}) {
        // i64 positions with YaRN's attention scaling on cos and sin, i32 without.
        RopeFrequencies f = rope_frequencies(D, 1e6);
        if (pos_dt == DType::i64) f.attention_scaling = 1.2079441f;
        SCOPED_TRACE(std::string(dtype_name(dt)) + " D=" + std::to_string(D));
        const Tensor x = rand_normal({2, 17, 3, D}, ++seed, dt);
        const Tensor pos = rand_uniform({2, 17}, 0, 32768, ++seed).to(pos_dt);
        const Tensor y = rope(x, pos, f), dx = rope_backward(x, pos, f);
        // x1 cos - x2 sin: two terms of size up to |x| ~ 2 that can cancel.
        EXPECT_PARITY(rope(to_cuda(x), to_cuda(pos), f), y, 2, 2.0);
        EXPECT_PARITY(rope_backward(to_cuda(x), to_cuda(pos), f), dx, 2, 2.0);
        EXPECT_PARITY(rope(non_contiguous(to_cuda(x)), to_cuda(pos), f), y, 2, 2.0);
      }
}

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
