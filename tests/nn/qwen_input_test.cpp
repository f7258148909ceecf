// Model inputs (nn/qwen_input.h): every builder's masks against the mask builders they stand for,
// the windowed masks of sliding-window models, and the errors a layer gets instead of a null mask.
#include "nn/qwen_input.h"

#include <gtest/gtest.h>

#include "tests/nn/windowed_config.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::config_with_window;
using testing::invalid_argument_message;

std::vector<bool> dense(const AttentionMask& m, int64_t row = 0) {
  return m.mask().row(row).dense().to_vector<bool>();
}
std::vector<bool> dense(const Mask& m) { return m.dense().to_vector<bool>(); }

Tensor ids(int64_t B, int64_t T) { return Tensor::zeros({B, T}, DType::i64); }

TEST(QwenInput, CausalRowsAndTheirWindow) {
  const QwenInput in = causal_input(ids(2, 5), config_with_window(2));
  EXPECT_EQ(in.position_ids.to_vector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4}));
  EXPECT_EQ(dense(*in.mask), dense(causal_mask(5)));
  EXPECT_EQ(in.window, 2);
  EXPECT_EQ(dense(*in.window_mask), dense(causal_mask(5, 2)));
  EXPECT_EQ(in.layer_mask(0, 0), in.mask);
  EXPECT_EQ(in.layer_mask(1, 2), in.window_mask);
  EXPECT_FALSE(causal_input(ids(1, 3), config_with_window(0)).window_mask);
}

TEST(QwenInput, LayersGetAClearErrorInsteadOfAMissingMask) {
  const QwenInput full = causal_input(ids(1, 4), config_with_window(0));
  EXPECT_EQ(invalid_argument_message([&] { full.layer_mask(3, 2); }),
            "[qwen] layer 3 is windowed but the input has no window mask");
  const QwenInput windowed = causal_input(ids(1, 4), config_with_window(2));
  EXPECT_EQ(invalid_argument_message([&] { windowed.layer_mask(1, 3); }),
            "[qwen] layer 1 has window 3 but the input's window mask has window 2");
}

TEST(QwenInput, PackedDocumentsPerRow) {
  const Tensor positions = Tensor::from_vector<int64_t>({0, 1, 2, 0, 1, 0, 1, 2, 3, 4}, {2, 5});
  const QwenInput in =
      documents_input(ids(2, 5), positions, {{3, 2}, {5, 0}}, config_with_window(2));
  EXPECT_EQ(dense(*in.mask, 0), dense(document_mask({3, 2})));
  EXPECT_EQ(dense(*in.mask, 1), dense(document_mask({5})));
  EXPECT_EQ(dense(*in.window_mask, 0), dense(document_mask({3, 2}, 5, 2)));
  EXPECT_EQ(in.position_ids.to_vector<int64_t>(), positions.to_vector<int64_t>());
  EXPECT_EQ(invalid_argument_message(
                [&] { documents_input(ids(2, 5), positions, {{5}}, config_with_window(0)); }),
            "[documents_input] 1 row layouts for 2 rows");
  EXPECT_EQ(invalid_argument_message([&] {
              documents_input(ids(2, 5), ids(2, 4), {{5}, {5}}, config_with_window(0));
            }),
            "[documents_input] position_ids [2, 4] must have input_ids' shape [2, 5]");
}

TEST(QwenInput, PrefixTreesSideBySideThenPadding) {
  const PrefixTree a{{2, 1, 1}, {{0, 1}, {0, 2}}}, b{{1, 1}, {{0, 1}}};
  const QwenInput in =
      prefix_tree_input(ids(1, 8), ids(1, 8), {{a, b}}, {2}, config_with_window(0));
  EXPECT_EQ(dense(*in.mask), dense(block_diagonal({prefix_tree_mask(a.node_lengths, a.sample_paths),
                                                   prefix_tree_mask(b.node_lengths, b.sample_paths),
                                                   causal_mask(2)})));
  EXPECT_EQ(invalid_argument_message([&] {
              prefix_tree_input(ids(1, 8), ids(1, 8), {{a, b}}, {2}, config_with_window(3));
            }),
            "[prefix_tree_input] prefix trees cannot feed a sliding-window model (window 3)");
}

TEST(QwenInput, DecodingSeesTheCacheAndItsWindow) {
  const QwenInput in = decode_input({7, 8}, 3, config_with_window(2), Device::cpu());
  EXPECT_EQ(in.position_ids.to_vector<int64_t>(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(dense(*in.mask), (std::vector<bool>{1, 1, 1, 1, 0,  //
                                                1, 1, 1, 1, 1}));
  // Query 0 sits at key position 3 and sees keys 2 and 3; query 1 keys 3 and 4.
  EXPECT_EQ(dense(*in.window_mask), (std::vector<bool>{0, 0, 1, 1, 0,  //
                                                       0, 0, 0, 1, 1}));
}

// A tree [a; b, c under a; d under b] over 2 cached keys: each token at 2 + its depth, seeing the
// cache, its ancestors and itself; a parent that is not earlier and a windowed model are refused.
TEST(QwenInput, TreeTokensSeeTheCacheAndTheirAncestors) {
  const QwenInput in =
      tree_input({7, 8, 9, 10}, {-1, 0, 0, 1}, 2, config_with_window(0), Device::cpu());
  EXPECT_EQ(in.position_ids.to_vector<int64_t>(), (std::vector<int64_t>{2, 3, 3, 4}));
  EXPECT_EQ(dense(*in.mask), (std::vector<bool>{1, 1, 1, 0, 0, 0,  //
                                                1, 1, 1, 1, 0, 0,  //
                                                1, 1, 1, 0, 1, 0,  //
                                                1, 1, 1, 1, 0, 1}));
  EXPECT_NE(invalid_argument_message([&] {
              tree_mask({-1, 2, 0}, 0);
            }).find("is not an earlier"),
            std::string::npos);
  EXPECT_EQ(invalid_argument_message([&] {
              tree_input({1, 2}, {-1, 0}, 0, config_with_window(2), Device::cpu());
            }),
            "[tree input] a model with sliding-window layers cannot verify a tree of tokens");
}

}  // namespace
}  // namespace sprig
