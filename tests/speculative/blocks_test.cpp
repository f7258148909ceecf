// Anchors and blocks against the worked examples of docs/semantics.md: E7 (anchors on a packed
// row, block inputs, positions, targets, mask), E8 (DFlash masks packed, unpacked, causal,
// windowed, a dropped block), E9 (positions), E12 (variable prefix), E13's document boundary of
// shifted labels, the uniform sampling of anchors, and bad anchors.
#include "speculative/blocks.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/attention/mask_test_util.h"
#include "tests/test_util.h"

namespace sprig::speculative {
namespace {

using I64 = std::vector<int64_t>;
using testing::dense_rows;

Tensor row_tensor(const I64& v, int64_t rows = 1) {
  return Tensor::from_vector(v, {rows, static_cast<int64_t>(v.size()) / rows});
}

// Row 0 of E6 (S = 10): documents A (4 tokens) and B with its padding (6), packed.
DraftRows e6_row0() {
  DraftRows r;
  r.input_ids = row_tensor({101, 102, 103, 104, 201, 202, 203, 0, 0, 0});
  r.loss_mask = row_tensor({0, 1, 1, 1, 0, 1, 1, 0, 0, 0});
  r.position_ids = row_tensor({0, 1, 2, 3, 0, 1, 2, 3, 4, 5});
  r.doc_remaining = row_tensor({3, 2, 1, 0, 2, 1, 0, 0, 0, 0});
  r.doc_lens = {{4, 6}};
  return r;
}

Anchors anchors_of(const I64& a, const std::vector<bool>& keep, int64_t rows = 1) {
  return {row_tensor(a, rows),
          Tensor::from_vector(keep, {rows, static_cast<int64_t>(a.size()) / rows})};
}

std::vector<std::string> mask_rows(const Blocks& b, int64_t S, int64_t row = 0) {
  return dense_rows(b.mask->mask().row(row), S);
}

I64 values(const Tensor& t) { return t.to_vector<int64_t>(); }

TEST(Anchors, E7PackedRowHasOneValidAnchor) {
  const DraftRows rows = e6_row0();
  Generator gen(1);
  const Anchors a = sample_anchors(rows, 3, 16, gen);
  EXPECT_EQ(values(a.anchors), I64({1}));  // supervised {1,2,3,5,6}; whole block inside: {0,1,4}
  EXPECT_EQ(a.keep.to_vector<bool>(), std::vector<bool>({true}));

  const Blocks b = make_blocks(rows, a, {.block_size = 3, .mask_token_id = 99});
  EXPECT_EQ(values(b.noise_ids), I64({102, 99, 99}));
  EXPECT_EQ(values(b.positions), I64({0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 1, 2, 3}));
  EXPECT_EQ(values(b.target_ids), I64({102, 103, 104}));
  EXPECT_EQ(b.block_mask.to_vector<float>(), std::vector<float>({1, 1, 1}));
  EXPECT_EQ(mask_rows(b, 10), std::vector<std::string>(3, "1000000000|111"));
  const Blocks jetspec =
      make_blocks(rows, a, {.block_size = 3, .mask_token_id = 99, .causal = true});
  EXPECT_EQ(mask_rows(jetspec, 10),
            (std::vector<std::string>{"1000000000|100", "1000000000|110", "1000000000|111"}));
}

TEST(Anchors, E7NoValidAnchorAnywhere) {
  DraftRows rows;
  rows.input_ids = row_tensor(I64(8, 5));
  rows.loss_mask = row_tensor(I64(8, 0));
  Generator gen(1);
  EXPECT_THROW(sample_anchors(rows, 4, 8, gen), NoValidAnchors);
  // Supervised only from position 5 on, but anchors stop at S - bs = 4.
  rows.loss_mask = row_tensor({0, 0, 0, 0, 0, 1, 1, 1});
  EXPECT_EQ(testing::invalid_argument_message([&] { sample_anchors(rows, 4, 8, gen); }),
            "[anchors] no valid anchor: no row has a supervised token at a position in [0, 4] "
            "with block_size=4");
  // Packed: every token supervised, but no block fits inside a document.
  rows.loss_mask = row_tensor(I64(8, 1));
  rows.position_ids = row_tensor({0, 1, 0, 1, 0, 1, 0, 1});
  rows.doc_remaining = row_tensor(I64(8, 0));
  rows.doc_lens = {{2, 2, 2, 2}};
  EXPECT_THROW(sample_anchors(rows, 4, 8, gen), NoValidAnchors);
}

// E8: S = 10 as two documents of 5, bs = 3, anchors [2, 7].
DraftRows e8_rows(bool packed) {
  DraftRows r;
  r.input_ids = row_tensor({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  r.loss_mask = row_tensor(I64(10, 1));
  if (packed) {
    r.position_ids = row_tensor({0, 1, 2, 3, 4, 0, 1, 2, 3, 4});
    r.doc_remaining = row_tensor({4, 3, 2, 1, 0, 4, 3, 2, 1, 0});
    r.doc_lens = {{5, 5}};
  }
  return r;
}

TEST(Blocks, E8MasksPositionsAndTargets) {
  const Anchors a = anchors_of({2, 7}, {true, true});
  const BlockOptions o{.block_size = 3, .mask_token_id = 0};
  const Blocks packed = make_blocks(e8_rows(true), a, o);
  EXPECT_EQ(
      mask_rows(packed, 10),
      (std::vector<std::string>{"1100000000|111000", "1100000000|111000", "1100000000|111000",
                                "0000011000|000111", "0000011000|000111", "0000011000|000111"}));
  EXPECT_EQ(values(packed.positions.narrow(1, 10, 6)), I64({2, 3, 4, 2, 3, 4}));
  EXPECT_EQ(values(packed.target_ids), I64({3, 4, 5, 8, 9, 10}));  // tokens at 2-4 and 7-9

  const Blocks unpacked = make_blocks(e8_rows(false), a, o);
  EXPECT_EQ(
      mask_rows(unpacked, 10),
      (std::vector<std::string>{"1100000000|111000", "1100000000|111000", "1100000000|111000",
                                "1111111000|000111", "1111111000|000111", "1111111000|000111"}));
  EXPECT_EQ(values(unpacked.positions.narrow(1, 10, 6)), I64({2, 3, 4, 7, 8, 9}));

  BlockOptions causal = o;
  causal.causal = true;
  EXPECT_EQ(
      mask_rows(make_blocks(e8_rows(true), a, causal), 10),
      (std::vector<std::string>{"1100000000|100000", "1100000000|110000", "1100000000|111000",
                                "0000011000|000100", "0000011000|000110", "0000011000|000111"}));
  BlockOptions window = o;
  window.sliding_window = 2;
  EXPECT_EQ(
      mask_rows(make_blocks(e8_rows(true), a, window), 10),
      (std::vector<std::string>{"0100000000|111000", "0000000000|111000", "0000000000|111000",
                                "0000001000|000111", "0000000000|000111", "0000000000|000111"}));
  window.sliding_window = 4;
  EXPECT_EQ(
      mask_rows(make_blocks(e8_rows(false), a, window), 10),
      (std::vector<std::string>{"1100000000|111000", "1100000000|111000", "0100000000|111000",
                                "0000111000|000111", "0000011000|000111", "0000001000|000111"}));
}

TEST(Blocks, E8DroppedBlockKeepsOnlyItsSlots) {
  DraftRows rows;
  rows.input_ids = row_tensor({1, 2, 3, 4, 5, 6});
  rows.loss_mask = row_tensor(I64(6, 1));
  const Blocks b = make_blocks(rows, anchors_of({1, 3}, {true, false}), {.block_size = 3});
  EXPECT_EQ(mask_rows(b, 6),
            (std::vector<std::string>{"100000|111000", "100000|111000", "100000|111000",
                                      "000000|000111", "000000|000111", "000000|000111"}));
  EXPECT_EQ(b.block_mask.to_vector<float>(), std::vector<float>({1, 1, 1, 0, 0, 0}));
}

TEST(Blocks, E9Positions) {
  DraftRows rows;
  rows.input_ids = row_tensor(I64(16, 1));
  rows.loss_mask = row_tensor(I64(16, 1));
  const Blocks b = make_blocks(rows, anchors_of({2, 10}, {true, true}), {.block_size = 4});
  EXPECT_EQ(values(b.positions.narrow(1, 16, 8)), I64({2, 3, 4, 5, 10, 11, 12, 13}));
  DraftRows packed = e8_rows(true);
  const Blocks p = make_blocks(packed, anchors_of({1, 6}, {true, true}), {.block_size = 4});
  EXPECT_EQ(values(p.positions.narrow(1, 10, 8)), I64({1, 2, 3, 4, 1, 2, 3, 4}));
}

TEST(Blocks, E12VariablePrefixShowsTheFirstTokens) {
  DraftRows rows;
  I64 ids;
  for (int64_t i = 1; i <= 20; ++i) ids.push_back(i);
  rows.input_ids = row_tensor(ids);
  rows.loss_mask = row_tensor(I64(20, 1));
  const Blocks b = make_blocks(rows, anchors_of({2, 8}, {true, false}),
                               {.block_size = 4, .mask_token_id = 99}, row_tensor({3, 2}));
  EXPECT_EQ(values(b.noise_ids), I64({3, 4, 5, 99, 99, 99, 99, 99}));
}

TEST(Blocks, E12PrefixLengthDistribution) {
  Generator gen(5);
  const Tensor l = sample_prefix_lengths(1, 20000, 4, 0.9, gen);
  std::map<int64_t, int64_t> counts;
  for (int64_t v : values(l)) ++counts[v];
  ASSERT_EQ(counts.size(), 2u);
  // P(2) : P(3) = 0.9^2 : 0.9^3 = 1 : 0.9, so P(3) = 0.9 / 1.9.
  EXPECT_NEAR(static_cast<double>(counts[3]) / 20000, 0.9 / 1.9, 0.012);
  EXPECT_EQ(values(sample_prefix_lengths(2, 3, 2, 0.9, gen)), I64(6, 1));  // bs 2: always 1
}

TEST(Blocks, E13ShiftedLabelsStopAtTheDocumentEnd) {
  // Documents of 8 and 8, bs 4, anchor 4 (3 tokens left in its document), labels from anchor + 1.
  DraftRows rows;
  I64 ids, pos, rem;
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t i = 0; i < 8; ++i) {
      ids.push_back(10 * d + i);
      pos.push_back(i);
      rem.push_back(7 - i);
    }
  rows.input_ids = row_tensor(ids);
  rows.loss_mask = row_tensor(I64(16, 1));
  rows.position_ids = row_tensor(pos);
  rows.doc_remaining = row_tensor(rem);
  rows.doc_lens = {{8, 8}};
  BlockOptions o{.block_size = 4, .label_start = 1, .labels_within_document = true};
  const Blocks b = make_blocks(rows, anchors_of({4}, {true}), o);
  EXPECT_EQ(b.block_mask.to_vector<float>(), std::vector<float>({1, 1, 1, 0}));  // position 8
  o.labels_within_document = false;
  EXPECT_EQ(make_blocks(rows, anchors_of({4}, {true}), o).block_mask.to_vector<float>(),
            std::vector<float>({1, 1, 1, 1}));
}

TEST(Anchors, UniformSortedSubsetsOfTheValidPositions) {
  DraftRows rows;  // row 0: 11 valid positions (0..10 of 14, bs 4), row 1: 3 valid positions
  rows.input_ids = row_tensor(I64(28, 7), 2);
  I64 lm(28, 0);
  for (int64_t t = 0; t < 14; ++t) lm[t] = 1;
  for (int64_t t : {3, 5, 8}) lm[14 + t] = 1;
  rows.loss_mask = row_tensor(lm, 2);
  Generator gen(9);
  std::map<int64_t, int64_t> picked;
  for (int trial = 0; trial < 2000; ++trial) {
    const Anchors a = sample_anchors(rows, 4, 4, gen);
    ASSERT_EQ(a.blocks(), 4);
    const I64 v = values(a.anchors);
    const std::vector<bool> keep = a.keep.to_vector<bool>();
    EXPECT_EQ(std::vector<bool>(keep.begin() + 4, keep.end()),
              std::vector<bool>({true, true, true, false}));
    EXPECT_EQ(I64(v.begin() + 4, v.end()), I64({3, 5, 8, 0}));  // all of row 1's, then padding
    EXPECT_TRUE(std::is_sorted(v.begin(), v.begin() + 4));
    EXPECT_EQ(std::set<int64_t>(v.begin(), v.begin() + 4).size(), 4u);
    for (int j = 0; j < 4; ++j) {
      EXPECT_LE(v[j], 10);
      ++picked[v[j]];
    }
  }
  ASSERT_EQ(picked.size(), 11u);  // positions 0..10 (S - bs = 10)
  for (const auto& [t, n] : picked) EXPECT_NEAR(n / 2000.0, 4.0 / 11.0, 0.05) << "position " << t;
  // N is the most any row has when num_anchors is larger; the same seed gives the same anchors.
  Generator a(3), b(3);
  EXPECT_EQ(sample_anchors(rows, 4, 64, a).blocks(), 11);
  Generator c(3);
  EXPECT_EQ(values(sample_anchors(rows, 4, 4, b).anchors),
            values(sample_anchors(rows, 4, 4, c).anchors));
}

TEST(Anchors, GivenAnchorsAreChecked) {
  const DraftRows rows = e8_rows(false);
  const auto error = [&](const I64& a, const std::vector<bool>& keep) {
    return testing::invalid_argument_message([&] { check_anchors(rows, anchors_of(a, keep), 3); });
  };
  EXPECT_EQ(error({2, 7}, {true, true}), "");
  EXPECT_EQ(error({2, 8}, {true, true}),
            "[anchors] row 0 block 1: anchor 8 is outside [0, 7] (block_size 3, 10 tokens)");
  EXPECT_EQ(error({5, 2}, {true, true}),
            "[anchors] row 0 block 1: anchor 2 comes before the previous 5 (anchors ascend)");
  EXPECT_EQ(error({2, 3}, {false, true}),
            "[anchors] row 0 block 1 is kept after a dropped block (kept blocks come first)");
  EXPECT_EQ(
      testing::invalid_argument_message([&] {
        check_anchors(rows, {row_tensor({2, 7}), Tensor::from_vector<bool>({true}, {1, 1})}, 3);
      }),
      "[anchors] keep [1, 1] must have the anchors' shape [1, 2]");
}

TEST(DraftRows, PartialPackingMetadataIsAnError) {
  DraftRows rows = e8_rows(true);
  rows.doc_remaining = Tensor();
  EXPECT_EQ(testing::invalid_argument_message([&] { rows.check(); }),
            "[draft] packed rows need position_ids, doc_remaining and the document lengths "
            "together");
  rows = e8_rows(true);
  rows.doc_lens = {{5, 4}};
  EXPECT_EQ(testing::invalid_argument_message([&] { rows.check(); }),
            "[draft] the documents of row 0 sum to 9, not the row length 10");
}

}  // namespace
}  // namespace sprig::speculative
