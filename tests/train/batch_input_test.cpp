// batch_input: the attention masks a collated batch gets, for full and sliding-window layers.
#include "train/batch_input.h"

#include <gtest/gtest.h>

#include "tests/nn/windowed_config.h"

namespace sprig {
namespace {

using testing::config_with_window;

// Two packed documents of 4 and 2 tokens in a row of 6.
data::Batch packed_batch() {
  data::Batch b;
  b.input_ids = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {1, 6});
  b.position_ids = Tensor::from_vector<int64_t>({0, 1, 2, 3, 0, 1}, {1, 6});
  b.seq_lens = Tensor::from_vector<int64_t>({4, 2}, {1, 2});
  b.num_pad = {0};
  return b;
}

std::vector<bool> dense(const AttentionMask& m) {
  return m.mask().row(0).dense().to_vector<bool>();
}

TEST(BatchInput, DocumentsGetOneCausalSquareEachAndTheWindowForSlidingLayers) {
  const QwenInput in = batch_input(packed_batch(), config_with_window(2), Device::cpu());
  EXPECT_EQ(dense(*in.mask), dense(*compile_attention_mask(BatchMask(document_mask({4, 2})))));
  ASSERT_TRUE(in.window_mask);
  // Window 2: each token sees itself and the token before it, inside its own document.
  const std::vector<bool> expected = {1, 0, 0, 0, 0, 0,  //
                                      1, 1, 0, 0, 0, 0,  //
                                      0, 1, 1, 0, 0, 0,  //
                                      0, 0, 1, 1, 0, 0,  //
                                      0, 0, 0, 0, 1, 0,  //
                                      0, 0, 0, 0, 1, 1};
  EXPECT_EQ(dense(*in.window_mask), expected);
}

TEST(BatchInput, FullAttentionModelsGetNoWindowMask) {
  EXPECT_FALSE(batch_input(packed_batch(), config_with_window(0), Device::cpu()).window_mask);
}

}  // namespace
}  // namespace sprig
