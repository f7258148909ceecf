// Mask builders: every worked example of docs/semantics.md §12 that has a mask (exact rectangles
// and dense rows), random masks against the predicates of docs/semantics.md §2 restated
// independently, and bad arguments.
#include "attention/mask.h"

#include <gtest/gtest.h>

#include "tests/attention/mask_test_util.h"
#include "tests/test_util.h"

namespace sprig {

void PrintTo(const Rect& r, std::ostream* os) {
  *os << "[" << r.q0 << "," << r.q1 << ")x[" << r.k0 << "," << r.k1 << ") "
      << rect_kind_name(r.kind) << " window " << r.window << " shift " << r.band_shift;
}

namespace {

using testing::dense_rows;
using testing::invalid_argument_message;
using Rows = std::vector<std::string>;
constexpr RectKind C = RectKind::causal, F = RectKind::full;

// The rectangles of a mask as (q0, q1, k0, k1, kind) without windows.
std::vector<Rect> plain(
    std::initializer_list<std::tuple<int64_t, int64_t, int64_t, int64_t, RectKind>> r) {
  std::vector<Rect> out;
  for (auto [q0, q1, k0, k1, kind] : r) out.push_back({q0, q1, k0, k1, kind});
  return out;
}

TEST(Mask, E1FoldedPrefixTree) {
  const Mask m = prefix_tree_mask({3, 2, 3}, {{0, 1}, {0, 2}});
  EXPECT_EQ(m.q_len, 8);
  EXPECT_EQ(m.k_len, 8);
  EXPECT_EQ(
      m.rects,
      plain({{0, 3, 0, 3, C}, {3, 5, 3, 5, C}, {3, 5, 0, 3, F}, {5, 8, 5, 8, C}, {5, 8, 0, 3, F}}));
  EXPECT_EQ(dense_rows(m), (Rows{"10000000", "11000000", "11100000", "11110000", "11111000",
                                 "11100100", "11100110", "11100111"}));
}

TEST(Mask, E2FoldEdgeCases) {
  // Empty prompt: node 0 is in no path, each completion is an independent causal block.
  const Mask empty_prompt = prefix_tree_mask({0, 2, 1}, {{1}, {2}});
  EXPECT_EQ(empty_prompt.q_len, 3);
  EXPECT_EQ(empty_prompt.rects, plain({{0, 2, 0, 2, C}, {2, 3, 2, 3, C}}));
  EXPECT_EQ(dense_rows(empty_prompt), (Rows{"100", "110", "001"}));
  const Mask one = prefix_tree_mask({1, 2}, {{0, 1}});
  EXPECT_EQ(one.rects, plain({{0, 1, 0, 1, C}, {1, 3, 1, 3, C}, {1, 3, 0, 1, F}}));
  EXPECT_EQ(dense_rows(one), (Rows{"100", "110", "111"}));
}

TEST(Mask, E3DepthThreeTree) {
  const Mask m = prefix_tree_mask({2, 1, 1, 2}, {{0, 1, 2}, {0, 1, 3}});
  EXPECT_EQ(m.q_len, 6);
  EXPECT_EQ(m.rects, plain({{0, 2, 0, 2, C},
                            {2, 3, 2, 3, C},
                            {2, 3, 0, 2, F},
                            {3, 4, 3, 4, C},
                            {3, 4, 0, 2, F},
                            {3, 4, 2, 3, F},
                            {4, 6, 4, 6, C},
                            {4, 6, 0, 2, F},
                            {4, 6, 2, 3, F}}));
  EXPECT_EQ(dense_rows(m), (Rows{"100000", "110000", "111000", "111100", "111010", "111011"}));
}

TEST(Mask, E3TreeAndVarlen) {
  const Mask tree = prefix_tree_mask({4, 2, 3}, {{0, 1}, {0, 2}});
  EXPECT_EQ(tree.q_len, 9);
  EXPECT_EQ(
      tree.rects,
      plain({{0, 4, 0, 4, C}, {4, 6, 4, 6, C}, {4, 6, 0, 4, F}, {6, 9, 6, 9, C}, {6, 9, 0, 4, F}}));
  const Mask varlen = document_mask({3, 5, 2});
  EXPECT_EQ(varlen.q_len, 10);
  EXPECT_EQ(varlen.rects, plain({{0, 3, 0, 3, C}, {3, 8, 3, 8, C}, {8, 10, 8, 10, C}}));
}

TEST(Mask, E4BlockCausal) {
  EXPECT_EQ(dense_rows(document_mask({3, 2, 1})),
            (Rows{"100000", "110000", "111000", "000100", "000110", "000001"}));
}

TEST(Mask, E5NeatPackedPadSeesNothing) {
  // attention_mask [1,1,1,1,1,2,2,0]: the pad token (index 7) is fully masked.
  const Mask m = block_diagonal({document_mask({5, 2}), Mask{1, 1, {}}});
  const Rows rows = dense_rows(m);
  EXPECT_EQ(rows[5], "00000100");
  EXPECT_EQ(rows[6], "00000110");
  EXPECT_EQ(rows[7], "00000000");
}

TEST(Mask, E6TargetMaskFollowsDocIds) {
  // Row 0: seq_lens [4, 6] (3 pads folded into document 1); row 1: [10, 0] is one document.
  for (const std::vector<int64_t>& seq_lens : {std::vector<int64_t>{4, 6}, {10, 0}}) {
    const Mask m = document_mask(seq_lens);
    for (int64_t q = 0; q < 10; ++q)
      for (int64_t k = 0; k < 10; ++k)
        EXPECT_EQ(m.allowed(q, k),
                  testing::doc_id(seq_lens, q) == testing::doc_id(seq_lens, k) && k <= q)
            << q << "," << k;
  }
  // Padding beyond the real lengths [4, 3] joins the last document, as the packer folds it.
  EXPECT_EQ(dense_rows(document_mask({4, 3}, 10)), dense_rows(document_mask({4, 6})));
  EXPECT_EQ(dense_rows(document_mask({3, 2, 0}, 7)), dense_rows(document_mask({3, 4})));
  EXPECT_EQ(dense_rows(document_mask({0, 0}, 3)), dense_rows(causal_mask(3)));
}

DFlashMaskSpec e8(bool packed, bool causal, int64_t window) {
  DFlashMaskSpec s{10, 3, {2, 7}, {true, true}, causal, {}, window};
  if (packed) s.seq_lens = {5, 5};
  return s;
}

TEST(Mask, E7AnchorRows) {
  DFlashMaskSpec s{10, 3, {1}, {true}, false, {4, 6}, 0};
  const Mask dflash = dflash_mask(s);
  EXPECT_EQ(dflash.q_len, 3);
  EXPECT_EQ(dflash.k_len, 13);
  EXPECT_EQ(dense_rows(dflash, 10), (Rows(3, "1000000000|111")));
  s.causal = true;
  EXPECT_EQ(dense_rows(dflash_mask(s), 10),
            (Rows{"1000000000|100", "1000000000|110", "1000000000|111"}));
}

TEST(Mask, E8AllDFlashVariants) {
  EXPECT_EQ(dense_rows(dflash_mask(e8(true, false, 0)), 10),
            (Rows{"1100000000|111000", "1100000000|111000", "1100000000|111000",
                  "0000011000|000111", "0000011000|000111", "0000011000|000111"}));
  EXPECT_EQ(dense_rows(dflash_mask(e8(false, false, 0)), 10),
            (Rows{"1100000000|111000", "1100000000|111000", "1100000000|111000",
                  "1111111000|000111", "1111111000|000111", "1111111000|000111"}));
  EXPECT_EQ(dense_rows(dflash_mask(e8(true, true, 0)), 10),
            (Rows{"1100000000|100000", "1100000000|110000", "1100000000|111000",
                  "0000011000|000100", "0000011000|000110", "0000011000|000111"}));
  EXPECT_EQ(dense_rows(dflash_mask(e8(true, false, 2)), 10),
            (Rows{"0100000000|111000", "0000000000|111000", "0000000000|111000",
                  "0000001000|000111", "0000000000|000111", "0000000000|000111"}));
  EXPECT_EQ(dense_rows(dflash_mask(e8(false, false, 4)), 10),
            (Rows{"1100000000|111000", "1100000000|111000", "0100000000|111000",
                  "0000111000|000111", "0000011000|000111", "0000001000|000111"}));
  const Mask padding = dflash_mask({6, 3, {1, 3}, {true, false}, false, {}, 0});
  EXPECT_EQ(dense_rows(padding, 6), (Rows{"100000|111000", "100000|111000", "100000|111000",
                                          "000000|000111", "000000|000111", "000000|000111"}));
}

TEST(Mask, DFlashZeroLengthDocumentsNeverSplit) {
  // seq_lens [3, 0, 2, 0]: positions 3 and 4 form one document (doc id 2), so the anchor at 4
  // sees position 3; the anchor at 2 sees [0, 2).
  const Mask m = dflash_mask({5, 1, {4, 2}, {true, true}, false, {3, 0, 2, 0}, 0});
  EXPECT_EQ(dense_rows(m, 5), (Rows{"00010|10", "11000|01"}));
}

TEST(Mask, RandomDFlashMatchesSpecPredicate) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const DFlashMaskSpec s = testing::random_dflash(1 + rng() % 40, 1 + rng() % 8, rng);
    const Mask m = dflash_mask(s);
    ASSERT_EQ(m.q_len, static_cast<int64_t>(s.anchors.size()) * s.block_size);
    ASSERT_EQ(m.k_len, s.ctx_len + m.q_len);
    const std::vector<int32_t> d = m.dense().to_vector<int32_t>();
    for (int64_t q = 0; q < m.q_len; ++q)
      for (int64_t k = 0; k < m.k_len; ++k)
        ASSERT_EQ(d[q * m.k_len + k], testing::dflash_allowed(s, q, k))
            << "trial " << trial << " q " << q << " k " << k;
  }
}

TEST(Mask, RandomPrefixTreesMatchSpecPredicate) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const testing::RandomTree t = testing::random_tree(1 + rng() % 30, rng);
    const Mask m = prefix_tree_mask(t.node_lengths, t.paths);
    const std::vector<int32_t> d = m.dense().to_vector<int32_t>();
    for (int64_t q = 0; q < m.q_len; ++q)
      for (int64_t k = 0; k < m.k_len; ++k)
        ASSERT_EQ(d[q * m.k_len + k], testing::prefix_tree_allowed(t.node_lengths, t.paths, q, k))
            << "trial " << trial << " q " << q << " k " << k;
  }
}

TEST(Mask, BlockDiagonalPlacesTreesSideBySide) {
  const Mask a = prefix_tree_mask({1, 1}, {{0, 1}});
  const Mask m = block_diagonal({a, causal_mask(2, 1), a});
  EXPECT_EQ(dense_rows(m), (Rows{"100000", "110000", "001000", "000100", "000010", "000011"}));
}

TEST(Mask, SlidingWindowCausal) {
  // Each query sees its 3 most recent keys (q - k < 3), within its document.
  EXPECT_EQ(dense_rows(causal_mask(5, 3)), (Rows{"10000", "11000", "11100", "01110", "00111"}));
  EXPECT_EQ(dense_rows(document_mask({2, 4}, {}, 2)),
            (Rows{"100000", "110000", "001000", "001100", "000110", "000011"}));
}

TEST(Mask, TrainingTimeTestSeesItsDocumentAtStepZeroAndItselfAtLaterSteps) {
  // Two documents of 2 and 3 positions at step 2: keys [step 0 | step 1 | step 2].
  EXPECT_EQ(dense_rows(ttt_mask({2, 3}, 5, 0)),
            (Rows{"10000", "11000", "00100", "00110", "00111"}));
  const Mask m = ttt_mask({2, 3}, 5, 2);
  EXPECT_EQ(m.k_len, 15);
  EXPECT_EQ(dense_rows(m), (Rows{"100001000010000", "110000100001000", "001000010000100",
                                 "001100001000010", "001110000100001"}));
  EXPECT_EQ(invalid_argument_message([] { ttt_mask({5}, 5, -1); }),
            "[ttt_mask] step must be >= 0, got -1");
}

TEST(Mask, BatchMaskRows) {
  const BatchMask shared(causal_mask(4));
  EXPECT_EQ(shared.num_rows(), 1);
  EXPECT_EQ(&shared.row(3), &shared.row(0));
  const BatchMask per_row({causal_mask(4), document_mask({2, 2})});
  EXPECT_EQ(per_row.num_rows(), 2);
  EXPECT_FALSE(per_row.row(1).allowed(2, 1));
  EXPECT_EQ(invalid_argument_message([] {
              BatchMask({causal_mask(4), causal_mask(5)});
            }),
            "[mask] batch rows have different shapes: [4, 4] and [5, 5]");
  EXPECT_EQ(invalid_argument_message([] { BatchMask(std::vector<Mask>{}); }),
            "[mask] a batch mask needs at least one mask");
  EXPECT_EQ(invalid_argument_message([] {
              BatchMask(Mask{4, 4, {{0, 5, 0, 4}}});
            }),
            "[mask] rectangle 0 [0, 5) x [0, 4) is not inside the mask shape [4, 4]");
}

TEST(Mask, PrefixTreePathsMustBeRootFirstChains) {
  const auto error = [](const std::vector<int64_t>& lengths,
                        const std::vector<std::vector<int64_t>>& paths) {
    return invalid_argument_message([&] { prefix_tree_mask(lengths, paths); });
  };
  const std::string op = "[prefix_tree_mask] ";
  // Node 1 would see node 2, which comes after it.
  EXPECT_EQ(error({2, 1, 1}, {{0, 2, 1}}),
            op + "sample_paths[0][2] = 1 does not come after its parent 2: node indices "
                 "increase along a path");
  EXPECT_EQ(error({2, 1, 1}, {{1, 2}}), op + "sample_paths[0] starts at node 1, not at the root 0");
  EXPECT_EQ(error({2, 1, 1}, {{0, 1}}), op + "node 2 lies on no sample path");
  EXPECT_EQ(error({2, 1, 1}, {{0, 1, 2}, {0, 2}}),
            op + "sample_paths[1][1] = 2 has parent 0 here but 1 on an earlier path");
  EXPECT_EQ(error({2, 1}, {{0, 1}, {}}), op + "sample_paths[1] is empty");
  // The trees folding makes are accepted: shared prompt, empty prompt (independent roots), deep.
  EXPECT_NO_THROW(prefix_tree_mask({2, 1, 1}, {{0, 1}, {0, 2}}));
  EXPECT_NO_THROW(prefix_tree_mask({0, 1, 1}, {{1}, {2}}));
  EXPECT_NO_THROW(prefix_tree_mask({2, 1, 1, 1}, {{0, 1, 2}, {0, 1, 3}}));
}

TEST(Mask, BadBuilderArguments) {
  EXPECT_EQ(invalid_argument_message([] { causal_mask(-1); }),
            "[causal_mask] length must be >= 0, got -1");
  EXPECT_EQ(invalid_argument_message([] { causal_mask(4, -2); }),
            "[causal_mask] sliding window must be >= 1 (or 0 for none), got -2");
  EXPECT_EQ(invalid_argument_message([] {
              document_mask({3, 4}, 6);
            }),
            "[document_mask] seq_lens sum to 7, more than length 6");
  EXPECT_EQ(invalid_argument_message([] {
              document_mask({3, -1});
            }),
            "[document_mask] seq_lens[1] = -1 is negative");
  EXPECT_EQ(invalid_argument_message([] {
              prefix_tree_mask({2, 2}, {{0, 2}});
            }),
            "[prefix_tree_mask] sample_paths[0][1] = 2 is not a node index in [0, 2)");
  EXPECT_EQ(invalid_argument_message([] {
              prefix_tree_mask({2, -2}, {{0, 1}});
            }),
            "[prefix_tree_mask] node_lengths[1] = -2 is negative");
  EXPECT_EQ(invalid_argument_message([] {
              dflash_mask({10, 3, {2, 8}, {true, true}, false, {}, 0});
            }),
            "[dflash_mask] anchors[1] = 8 is outside [0, max(ctx_len - block_size, 0)] = [0, 7]");
  EXPECT_EQ(invalid_argument_message([] {
              dflash_mask({10, 3, {2}, {true, false}, false, {}, 0});
            }),
            "[dflash_mask] keep has 2 entries for 1 anchors");
  EXPECT_EQ(invalid_argument_message([] {
              dflash_mask({10, 0, {}, {}, false, {}, 0});
            }),
            "[dflash_mask] block_size must be >= 1, got 0");
  EXPECT_EQ(invalid_argument_message([] {
              dflash_mask({10, 3, {2}, {true}, false, {4, 5}, 0});
            }),
            "[dflash_mask] seq_lens sum to 9, expected ctx_len 10");
}

}  // namespace
}  // namespace sprig
