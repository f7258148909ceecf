// CUDA parity of the indexing ops: embedding, index_select and gather with their backward (the
// tables of tests/parity/index_cases.h), concat and split, and the ids' range check.
#include <gtest/gtest.h>

#include "tensor/ops.h"
#include "tests/parity/index_cases.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;

const Device kCuda = Device::cuda();

SPRIG_GPU_PARITY_TEST(IndexGpu, EmbeddingAndBackward, parity::embedding_cases())
SPRIG_GPU_PARITY_TEST(IndexGpu, IndexSelectAndBackward, parity::index_select_cases())
SPRIG_GPU_PARITY_TEST(IndexGpu, GatherAndBackward, parity::gather_cases())

TEST(IndexGpu, ConcatSplitAndIdChecks) {
  SPRIG_REQUIRE_CUDA();
  const Tensor a = testing::rand_normal({17, 31}, 400), b = testing::rand_normal({17, 1}, 401);
  const Tensor joined = concat({a.to(kCuda), testing::non_contiguous(b.to(kCuda))}, 1);
  EXPECT_EQ(joined.device(), kCuda);
  EXPECT_TRUE(all_close(joined, concat({a, b}, 1), 0));
  const std::vector<Tensor> parts = split(joined, {31, 1}, 1);
  EXPECT_TRUE(all_close(parts[1], b, 0));
  // Ids on the device are range-checked on the host, with the same message as on the CPU.
  const Tensor w = Tensor::zeros({64, 2}, DType::f32, kCuda);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              embedding(w, Tensor::from_vector<int64_t>({1, 2, 3, 70}, {4}, kCuda));
            }),
            "[embedding] id 70 out of range [0, 64) at position 3");
  EXPECT_EQ(testing::invalid_argument_message(
                [&] { embedding(w, Tensor::from_vector<int64_t>({1}, {1})); }),
            "[embedding] tensors are on different devices: cuda:0 and cpu");
}

}  // namespace
}  // namespace sprig
