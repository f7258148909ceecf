// Rollout folding (docs/semantics.md §1, worked examples E1, E2), mock rollouts, and collation of
// several folded groups per row and several rows per batch.
#include "data/prefix_tree.h"

#include <gtest/gtest.h>

#include <cmath>

#include "data/batch.h"
#include "data/packing.h"
#include "tests/data/data_test_util.h"
#include "tests/test_util.h"

namespace sprig::data {
namespace {

using testing::i64;
using testing::row;
using Ints = std::vector<int32_t>;
using Paths = std::vector<std::vector<int64_t>>;

std::vector<int64_t> positions(const Document& doc) {
  std::vector<int64_t> pos(doc.input_ids.size());
  write_tree_positions(doc.node_lengths, pos.data());
  return pos;
}

Corpus folded_corpus(const std::vector<RolloutGroup>& groups) {
  Corpus c;
  c.form = TargetForm::labels;
  c.folded = true;
  c.sources = {"mem"};
  for (const RolloutGroup& g : groups) c.docs.push_back(fold(g));
  return c;
}

TEST(Fold, E1PromptOfThreeTwoCompletions) {
  const Document d = fold({{11, 12, 13}, {{21, 22}, {31, 32, 33}}});
  EXPECT_EQ(d.input_ids, (Ints{11, 12, 13, 21, 22, 31, 32, 33}));
  EXPECT_EQ(d.labels, (Ints{-100, -100, -100, 22, -100, 32, 33, -100}));
  EXPECT_EQ(positions(d), i64({0, 1, 2, 3, 4, 3, 4, 5}));
  EXPECT_EQ(d.node_lengths, (Ints{3, 2, 3}));
  EXPECT_EQ(tree_sample_paths(d.node_lengths), (Paths{{0, 1}, {0, 2}}));
}

TEST(Fold, E2EdgeCases) {
  Document d = fold({{1, 2}, {{10, 11}, {20, 21, 22}}});
  EXPECT_EQ(d.input_ids, (Ints{1, 2, 10, 11, 20, 21, 22}));
  EXPECT_EQ(d.labels, (Ints{-100, -100, 11, -100, 21, 22, -100}));
  EXPECT_EQ(positions(d), i64({0, 1, 2, 3, 2, 3, 4}));
  EXPECT_EQ(d.node_lengths, (Ints{2, 2, 3}));
  EXPECT_EQ(tree_sample_paths(d.node_lengths), (Paths{{0, 1}, {0, 2}}));

  d = fold({{5}, {{7, 8}}});
  EXPECT_EQ(d.input_ids, (Ints{5, 7, 8}));
  EXPECT_EQ(d.labels, (Ints{-100, 8, -100}));
  EXPECT_EQ(positions(d), i64({0, 1, 2}));
  EXPECT_EQ(d.node_lengths, (Ints{1, 2}));
  EXPECT_EQ(tree_sample_paths(d.node_lengths), (Paths{{0, 1}}));

  // Empty prompt: node 0 stays (length 0) but is left out of every path.
  d = fold({{}, {{10, 11}, {20}}});
  EXPECT_EQ(d.input_ids, (Ints{10, 11, 20}));
  EXPECT_EQ(d.labels, (Ints{11, -100, -100}));
  EXPECT_EQ(positions(d), i64({0, 1, 0}));
  EXPECT_EQ(d.node_lengths, (Ints{0, 2, 1}));
  EXPECT_EQ(tree_sample_paths(d.node_lengths), (Paths{{1}, {2}}));

  EXPECT_EQ(fold({{1}, {{10, 11}}}, /*ignore_index=*/-1).labels, (Ints{-1, 11, -1}));
}

TEST(Fold, E2CollateOneGroup) {
  const Corpus corpus = folded_corpus({{{1, 2}, {{10, 11}, {20}}}});
  const PackPlan plan = plan_rows(corpus, {Packing::fold, 5});
  const Batch b = collate(corpus, plan, {0}, 0);
  EXPECT_EQ(b.input_ids.shape(), (Shape{1, 5}));
  EXPECT_EQ(b.labels.to_vector<int64_t>(), i64({-100, -100, 11, -100, -100}));
  EXPECT_EQ(b.input_ids.to_vector<int64_t>(), i64({1, 2, 10, 11, 20}));
  EXPECT_EQ(b.position_ids.to_vector<int64_t>(), i64({0, 1, 2, 3, 2}));
  EXPECT_FALSE(b.loss_mask.defined());
  ASSERT_EQ(b.groups.size(), 1u);
  EXPECT_EQ(b.groups[0].row, 0);
  EXPECT_EQ(b.groups[0].offset, 0);
  EXPECT_EQ(b.groups[0].node_lengths, i64({2, 2, 1}));
  EXPECT_EQ(b.groups[0].sample_paths, (Paths{{0, 1}, {0, 2}}));
}

TEST(Fold, Errors) {
  EXPECT_THROW(fold({{1, 2}, {}}), std::invalid_argument);
  EXPECT_THROW(fold({{1, 2}, {{3}, {}}}), std::invalid_argument);
}

// Three groups (lengths 5, 4, 6) into rows of 10: [g0 g1] [g2], each tree at its own offset.
TEST(Fold, SeveralGroupsPerRowAndSeveralRows) {
  const Corpus corpus = folded_corpus(
      {{{1, 2}, {{3}, {4, 5}}}, {{6}, {{7, 8, 9}}}, {{}, {{10, 11, 12}, {13, 14, 15}}}});
  const PackPlan plan = plan_rows(corpus, {Packing::fold, 10});
  ASSERT_EQ(plan.rows.size(), 2u);
  const Batch b = collate(corpus, plan, {0, 1}, /*pad_id=*/0);
  EXPECT_EQ(row(b.input_ids, 0), i64({1, 2, 3, 4, 5, 6, 7, 8, 9, 0}));
  EXPECT_EQ(row(b.labels, 0), i64({-100, -100, -100, 5, -100, -100, 8, 9, -100, -100}));
  EXPECT_EQ(row(b.position_ids, 0), i64({0, 1, 2, 2, 3, 0, 1, 2, 3, 4}));
  EXPECT_EQ(row(b.input_ids, 1), i64({10, 11, 12, 13, 14, 15, 0, 0, 0, 0}));
  EXPECT_EQ(row(b.labels, 1), i64({11, 12, -100, 14, 15, -100, -100, -100, -100, -100}));
  EXPECT_EQ(row(b.position_ids, 1), i64({0, 1, 2, 0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(b.seq_lens.to_vector<int64_t>(), i64({5, 5, 10, 0}));
  EXPECT_EQ(b.num_pad, i64({1, 4}));
  ASSERT_EQ(b.groups.size(), 3u);
  EXPECT_EQ(b.groups[1].row, 0);
  EXPECT_EQ(b.groups[1].offset, 5);
  EXPECT_EQ(b.groups[1].node_lengths, i64({1, 3}));
  EXPECT_EQ(b.groups[2].row, 1);
  EXPECT_EQ(b.groups[2].offset, 0);
  EXPECT_EQ(b.groups[2].sample_paths, (Paths{{1}, {2}}));
}

// The example: completions [10, 11, 12] and [20, 21] under one prompt score 3 tokens in
// the reference layout and all 5 with the first token of each supervised from the last prompt
// position.
TEST(ScoredTokens, TheFirstTokenOfEachCompletionFromTheLastPromptPosition) {
  const Corpus corpus = folded_corpus({{{1, 2}, {{10, 11, 12}, {20, 21}}}});
  const Batch b = collate(corpus, plan_rows(corpus, {Packing::fold, 7}), {0}, 0);
  const ScoredTokens plain = scored_tokens(b, false);
  EXPECT_EQ(plain.rows, i64({2, 3, 5}));
  EXPECT_EQ(plain.targets, i64({11, 12, 21}));
  EXPECT_EQ(plain.positions, i64({3, 4, 6}));
  EXPECT_EQ(plain.sequences, i64({0, 0, 1}));
  EXPECT_EQ(plain.num_sequences, 2);
  const ScoredTokens all = scored_tokens(b, true);
  EXPECT_EQ(all.rows, i64({1, 1, 2, 3, 5}));
  EXPECT_EQ(all.targets, i64({10, 20, 11, 12, 21}));
  EXPECT_EQ(all.positions, i64({2, 5, 3, 4, 6}));
  EXPECT_EQ(all.sequences, i64({0, 1, 0, 0, 1}));
}

// The batch of SeveralGroupsPerRowAndSeveralRows: rows of 10 [g0 g1 pad] [g2 pad], g2 without a
// prompt (its first tokens have no predicting position).
TEST(ScoredTokens, SeveralGroupsPerRowAndAGroupWithoutPrompt) {
  const Corpus corpus = folded_corpus(
      {{{1, 2}, {{3}, {4, 5}}}, {{6}, {{7, 8, 9}}}, {{}, {{10, 11, 12}, {13, 14, 15}}}});
  const Batch b = collate(corpus, plan_rows(corpus, {Packing::fold, 10}), {0, 1}, 0);
  const ScoredTokens s = scored_tokens(b, true);
  EXPECT_EQ(s.rows, i64({1, 1, 3, 5, 6, 7, 10, 11, 13, 14}));
  EXPECT_EQ(s.targets, i64({3, 4, 5, 7, 8, 9, 11, 12, 14, 15}));
  EXPECT_EQ(s.positions, i64({2, 3, 4, 6, 7, 8, 11, 12, 14, 15}));
  EXPECT_EQ(s.sequences, i64({0, 1, 1, 2, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(s.num_sequences, 5);
  EXPECT_EQ(scored_tokens(b, false).size(), 7);
}

TEST(ScoredTokens, DocumentsAreTheSequencesOfAPackedBatch) {
  Corpus corpus;
  corpus.sources = {"mem"};
  corpus.docs.resize(2);
  corpus.docs[0].input_ids = {1, 2, 3};
  corpus.docs[0].labels = {2, 3, -100};
  corpus.docs[1].input_ids = {4, 5};
  corpus.docs[1].labels = {5, -100};
  const Batch b = collate(corpus, plan_rows(corpus, {Packing::bfd, 6}), {0}, 0);
  const ScoredTokens s = scored_tokens(b, true);  // no folded group: no first-token prediction
  EXPECT_EQ(s.rows, i64({0, 1, 3}));
  EXPECT_EQ(s.targets, i64({2, 3, 5}));
  EXPECT_EQ(s.sequences, i64({0, 0, 1}));
  EXPECT_EQ(s.num_sequences, 2);
}

TEST(Fold, AdvantagesAndOldLogProbsFollowTheirTokens) {
  RolloutGroup g{{1, 2}, {{10, 11}, {20}}};
  g.advantages = {0.5f, -1.0f};
  g.old_logprobs = {{-0.25f, -1.5f}, {-2.0f}};
  const Document d = fold(g);
  EXPECT_EQ(d.advantages, (std::vector<float>{0, 0, 0.5f, 0.5f, -1.0f}));
  EXPECT_EQ(d.old_logprobs, (std::vector<float>{0, 0, -0.25f, -1.5f, -2.0f}));
  Corpus corpus = folded_corpus({g, {{3}, {{30, 31}}}});
  const PackPlan plan = plan_rows(corpus, {Packing::fold, 6});
  ASSERT_EQ(plan.rows.size(), 2u);
  const Batch b = collate(corpus, plan, {0}, 0);
  EXPECT_EQ(b.advantages.to_vector<float>(), (std::vector<float>{0, 0, 0.5f, 0.5f, -1.0f, 0}));
  EXPECT_EQ(b.old_logprobs.to_vector<float>(), (std::vector<float>{0, 0, -0.25f, -1.5f, -2.0f, 0}));
  EXPECT_FALSE(collate(corpus, plan, {1}, 0).advantages.defined());
  EXPECT_EQ(::sprig::testing::invalid_argument_message([&] {
              collate(corpus, plan, {0, 1}, 0);
            }),
            "[collate] mem:0 has no advantages while mem:0 in the same batch has");

  g.advantages = {1.0f};
  EXPECT_EQ(::sprig::testing::invalid_argument_message([&] { fold(g); }),
            "[fold] 1 advantages for 2 completions (give one per completion)");
  g.advantages = {1.0f, std::nanf("")};
  EXPECT_EQ(::sprig::testing::invalid_argument_message([&] { fold(g); }),
            "[fold] advantage 1 is not finite");
  g.advantages = {};
  g.old_logprobs = {{-0.25f}, {-2.0f}};
  EXPECT_EQ(::sprig::testing::invalid_argument_message([&] { fold(g); }),
            "[fold] completion 0 has 2 tokens but 1 old log-probs");
  g.old_logprobs = {{-0.25f, 0.5f}, {-2.0f}};
  EXPECT_EQ(::sprig::testing::invalid_argument_message([&] { fold(g); }),
            "[fold] old log-prob 1 of completion 0 = 0.500000 is not a log-probability (finite "
            "and <= 0)");
}

TEST(MockRollouts, ShapesRangeAndDeterminism) {
  MockRolloutOptions options;
  options.num_groups = 3;
  options.vocab_size = 5;
  const std::vector<RolloutGroup> a = mock_rollouts(options), b = mock_rollouts(options);
  ASSERT_EQ(a.size(), 3u);
  for (size_t g = 0; g < a.size(); ++g) {
    EXPECT_EQ(a[g].prompt_ids.size(), 32u);
    ASSERT_EQ(a[g].completions.size(), 4u);
    EXPECT_EQ(a[g].prompt_ids, b[g].prompt_ids);
    EXPECT_EQ(a[g].completions, b[g].completions);
    std::vector<int32_t> seen(5, 0);
    for (int32_t t : a[g].prompt_ids) seen.at(t) = 1;
    for (const auto& c : a[g].completions) {
      EXPECT_EQ(c.size(), 16u);
      for (int32_t t : c) seen.at(t) = 1;
    }
    EXPECT_EQ(seen, (Ints{0, 0, 1, 1, 1}));  // 96 draws from {2, 3, 4} hit each value
  }
  options.seed = 1;
  EXPECT_NE(mock_rollouts(options)[0].prompt_ids, a[0].prompt_ids);
}

}  // namespace
}  // namespace sprig::data
