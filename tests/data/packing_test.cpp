// Packers and collation: the worked examples of docs/semantics.md E4 (SFT packing), E5 (decreasing
// fit), E6 (DFlash packing), E9 (document ids), error conditions, and randomised layout properties.
#include "data/packing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "data/batch.h"
#include "tensor/random.h"
#include "tests/data/data_test_util.h"

namespace sprig::data {
namespace {

using testing::i64;
using testing::row;
using Bins = std::vector<std::vector<int64_t>>;

std::vector<int64_t> all_rows(const PackPlan& plan) {
  std::vector<int64_t> ids(plan.rows.size());
  std::iota(ids.begin(), ids.end(), int64_t{0});
  return ids;
}

// The reference's seq_lens of an SFT pack (docs/semantics.md §4.9): the documents' own lengths,
// padding not folded in.
std::vector<int64_t> unpadded_seq_lens(const Batch& b, int64_t r) {
  std::vector<int64_t> lens = row(b.seq_lens, r);
  while (!lens.empty() && lens.back() == 0) lens.pop_back();
  lens.back() -= b.num_pad[r];
  return lens;
}

TEST(Packing, E4SftPackSeqLen10) {
  const Corpus corpus =
      testing::labels_corpus({{1, 2, 3}, {4, 5, 6, 7}, {8, 9}, {10, 11, 12, 13, 14}});
  const PackPlan plan = plan_rows(corpus, {Packing::sft, 10});
  ASSERT_EQ(plan.rows.size(), 2u);
  const Batch b = collate(corpus, plan, {0, 1}, /*pad_id=*/0);
  EXPECT_EQ(row(b.input_ids, 0), i64({1, 2, 3, 4, 5, 6, 7, 8, 9, 0}));
  EXPECT_EQ(row(b.labels, 0), i64({1, 2, 3, 4, 5, 6, 7, 8, 9, -100}));
  EXPECT_EQ(row(b.position_ids, 0), i64({0, 1, 2, 0, 1, 2, 3, 0, 1, 2}));
  EXPECT_EQ(unpadded_seq_lens(b, 0), i64({3, 4, 2}));
  EXPECT_EQ(row(b.seq_lens, 0), i64({3, 4, 3}));  // the reference's seq_lens_padded
  EXPECT_EQ(row(b.input_ids, 1), i64({10, 11, 12, 13, 14, 0, 0, 0, 0, 0}));
  EXPECT_EQ(row(b.labels, 1), i64({10, 11, 12, 13, 14, -100, -100, -100, -100, -100}));
  EXPECT_EQ(row(b.position_ids, 1), i64({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(unpadded_seq_lens(b, 1), i64({5}));
  EXPECT_EQ(row(b.seq_lens, 1), i64({10, 0, 0}));
  EXPECT_FALSE(b.loss_mask.defined());
  EXPECT_FALSE(b.doc_remaining.defined());
  EXPECT_EQ(b.num_tokens(), 14);
  EXPECT_DOUBLE_EQ(plan.padding_fraction(), 6.0 / 20.0);
}

TEST(Packing, E4MaxPacks) {
  const Corpus corpus =
      testing::labels_corpus({{1, 2, 3}, {4, 5, 6, 7}, {8, 9}, {10, 11, 12, 13, 14}});
  EXPECT_EQ(plan_rows(corpus, {Packing::sft, 5}).rows.size(), 4u);
  EXPECT_EQ(plan_rows(corpus, {Packing::sft, 5, true, 2}).rows.size(), 2u);
  const PackPlan three = plan_rows(corpus, {Packing::sft, 5, true, 3});
  ASSERT_EQ(three.rows.size(), 3u);
  EXPECT_EQ(three.rows[2].front().doc, 2);  // the first rows are kept, the leftover dropped
  EXPECT_EQ(three.tokens, 9);
}

TEST(Packing, E5WorstFitDecreasingIsSpecKnapsack) {
  EXPECT_EQ(fit_decreasing({5, 3, 4, 2, 6}, 8, FitRule::worst), (Bins{{4}, {0, 3}, {2, 1}}));
  EXPECT_EQ(fit_decreasing({4, 4, 2, 2}, 6, FitRule::worst), (Bins{{0, 2}, {1, 3}}));
  EXPECT_EQ(fit_decreasing({3, 3, 3, 3}, 5, FitRule::worst), (Bins{{0}, {1}, {2}, {3}}));
  // Best fit puts the 3 with the 5 (filling it) and the 2 with the 6.
  EXPECT_EQ(fit_decreasing({5, 3, 4, 2, 6}, 8, FitRule::best), (Bins{{4, 3}, {0, 1}, {2}}));
}

// E5's packed bin of lengths 5 and 2 into 8. sprig continues the last document's positions over
// the padding (as SFT packing does) where the reference's neat packer writes 0.
TEST(Packing, E5BinLayout) {
  const Corpus corpus = testing::labels_corpus({{1, 2, 3, 4, 5}, {13, 14}});
  const PackPlan plan = plan_rows(corpus, {Packing::bfd, 8});
  ASSERT_EQ(plan.rows.size(), 1u);
  const Batch b = collate(corpus, plan, {0}, /*pad_id=*/7);
  EXPECT_EQ(row(b.input_ids, 0), i64({1, 2, 3, 4, 5, 13, 14, 7}));
  EXPECT_EQ(row(b.position_ids, 0), i64({0, 1, 2, 3, 4, 0, 1, 2}));
  EXPECT_EQ(row(b.labels, 0), i64({1, 2, 3, 4, 5, 13, 14, -100}));
  EXPECT_EQ(row(context_doc_ids(b.seq_lens, 8), 0), i64({0, 0, 0, 0, 0, 1, 1, 1}));
}

Corpus e6_corpus() {
  return testing::loss_mask_corpus({{{101, 102, 103, 104}, {0, 1, 1, 1}},
                                    {{201, 202, 203}, {0, 1, 1}},
                                    {{301, 302, 303, 304, 305}, {0, 0, 1, 1, 1}}});
}

TEST(Packing, E6DflashPacker) {
  const Corpus corpus = e6_corpus();
  const PackPlan plan = plan_rows(corpus, {Packing::dflash, 10});
  ASSERT_EQ(plan.rows.size(), 2u);
  const Batch b = collate(corpus, plan, {0, 1}, /*pad_id=*/0);
  EXPECT_EQ(row(b.input_ids, 0), i64({101, 102, 103, 104, 201, 202, 203, 0, 0, 0}));
  EXPECT_EQ(row(b.loss_mask, 0), i64({0, 1, 1, 1, 0, 1, 1, 0, 0, 0}));
  EXPECT_EQ(row(b.attention_mask, 0), i64({1, 1, 1, 1, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(row(b.doc_remaining, 0), i64({3, 2, 1, 0, 2, 1, 0, 0, 0, 0}));
  EXPECT_EQ(row(b.position_ids, 0), i64({0, 1, 2, 3, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(row(b.input_ids, 1), i64({301, 302, 303, 304, 305, 0, 0, 0, 0, 0}));
  EXPECT_EQ(row(b.loss_mask, 1), i64({0, 0, 1, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(row(b.attention_mask, 1), i64({1, 1, 1, 1, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(row(b.doc_remaining, 1), i64({4, 3, 2, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(row(b.position_ids, 1), i64({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(b.seq_lens.shape(), (Shape{2, 2}));
  EXPECT_EQ(b.seq_lens.to_vector<int64_t>(), i64({4, 6, 10, 0}));
  EXPECT_FALSE(b.labels.defined());
  const Tensor doc_ids = context_doc_ids(b.seq_lens, 10);
  EXPECT_EQ(row(doc_ids, 0), i64({0, 0, 0, 0, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(row(doc_ids, 1), i64({0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));
}

// padded: E6's documents one per row, laid out as dflash lays out a row (the unpacked rows of the
// draft trainers: positions run 0..S-1 over the padding).
TEST(Packing, PaddedPutsOneDocumentPerRow) {
  const Corpus corpus = e6_corpus();
  const PackPlan plan = plan_rows(corpus, {Packing::padded, 10});
  ASSERT_EQ(plan.rows.size(), 3u);
  const Batch b = collate(corpus, plan, {0, 1, 2}, /*pad_id=*/0);
  EXPECT_EQ(row(b.input_ids, 0), i64({101, 102, 103, 104, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(row(b.loss_mask, 0), i64({0, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(row(b.doc_remaining, 0), i64({3, 2, 1, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(row(b.position_ids, 0), i64({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(row(b.input_ids, 1), i64({201, 202, 203, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(b.seq_lens.to_vector<int64_t>(), i64({10, 10, 10}));
  EXPECT_EQ(plan.padding_fraction(), 1.0 - 12.0 / 30.0);
  // Longer documents are truncated, as dflash truncates them.
  EXPECT_EQ(plan_rows(corpus, {Packing::padded, 4}).truncated, 1);
}

TEST(Packing, E9ContextDocIds) {
  const Tensor seq_lens = Tensor::from_vector<int64_t>({3, 2, 0}, {1, 3});
  EXPECT_EQ(context_doc_ids(seq_lens, 5).to_vector<int64_t>(), i64({0, 0, 0, 1, 1}));
  EXPECT_THROW(context_doc_ids(Tensor::from_vector<int64_t>({5}, {1}), 5), std::invalid_argument);
}

TEST(Packing, DflashTruncatesLongDocuments) {
  const Corpus corpus = testing::loss_mask_corpus({{{1, 2, 3, 4, 5, 6}, {}}, {{7, 8}, {1, 0}}});
  const PackPlan plan = plan_rows(corpus, {Packing::dflash, 4});
  EXPECT_EQ(plan.truncated, 1);
  const Batch b = collate(corpus, plan, {0, 1}, 0);
  EXPECT_EQ(row(b.input_ids, 0), i64({1, 2, 3, 4}));
  EXPECT_EQ(row(b.loss_mask, 0), i64({1, 1, 1, 1}));  // no loss_mask: every token supervised
  EXPECT_EQ(row(b.doc_remaining, 0), i64({3, 2, 1, 0}));
  EXPECT_EQ(row(b.loss_mask, 1), i64({1, 0, 0, 0}));
}

TEST(Packing, LongDocumentsDroppedOrRejected) {
  const Corpus corpus = testing::labels_corpus({{1, 2, 3, 4, 5, 6}, {7, 8}, {}});
  for (Packing mode : {Packing::sft, Packing::bfd}) {
    const PackPlan plan = plan_rows(corpus, {mode, 4});
    EXPECT_EQ(plan.dropped_long, 1);
    EXPECT_EQ(plan.empty, 1);
    EXPECT_EQ(plan.documents, 1);
    try {
      plan_rows(corpus, {mode, 4, /*drop_long_samples=*/false});
      ADD_FAILURE() << "a long document was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_STREQ(e.what(),
                   "[pack] mem:1 has 6 tokens, more than seq_len 4 "
                   "(drop_long_samples: true drops it)");
    }
  }
}

TEST(Packing, Errors) {
  const Corpus nothing = testing::labels_corpus({{}, {1, 2, 3}});
  EXPECT_THROW(plan_rows(nothing, {Packing::sft, 2}), std::invalid_argument);  // zero packs
  EXPECT_THROW(plan_rows(testing::loss_mask_corpus({{{}, {}}}), {Packing::dflash, 4}),
               std::invalid_argument);
  EXPECT_THROW(plan_rows(nothing, {Packing::dflash, 4}), std::invalid_argument);  // wrong form
  EXPECT_THROW(plan_rows(nothing, {Packing::fold, 4}), std::invalid_argument);
  EXPECT_THROW(plan_rows(nothing, {Packing::sft, 0}), std::invalid_argument);
  EXPECT_THROW(packing_from_name("neat"), std::invalid_argument);
  EXPECT_THROW(fit_in_order({3, 9}, 8), std::invalid_argument);
  const PackPlan plan = plan_rows(nothing, {Packing::sft, 4});
  EXPECT_THROW(collate(nothing, plan, {1}, 0), std::invalid_argument);
}

// Long-tailed lengths in [1, cap]: mostly short, a few near the cap.
std::vector<int64_t> long_tailed(int64_t n, int64_t cap, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> lengths(n);
  for (int64_t& len : lengths)
    len = std::clamp<int64_t>(static_cast<int64_t>(std::exp(gen.next_normal() + 3.5)), 1, cap);
  return lengths;
}

TEST(Packing, BestFitDecreasingPacksAtLeastAsTightAsKnapsack) {
  for (uint64_t seed = 0; seed < 5; ++seed) {
    const std::vector<int64_t> lengths = long_tailed(2000, 256, seed);
    const Bins best = fit_decreasing(lengths, 256, FitRule::best);
    const Bins worst = fit_decreasing(lengths, 256, FitRule::worst);
    EXPECT_LE(best.size(), worst.size());
    std::vector<int> used(lengths.size(), 0);  // every item exactly once, no bin overfull
    for (const auto& bin : best) {
      int64_t fill = 0;
      for (int64_t i : bin) {
        ++used[i];
        fill += lengths[i];
      }
      EXPECT_LE(fill, 256);
    }
    EXPECT_EQ(std::count(used.begin(), used.end(), 1), static_cast<int64_t>(lengths.size()));
  }
}

// Every mode on random documents: each token kept once, in order, in its document's segment;
// seq_lens sum to S; positions restart per document; doc_remaining counts down to 0; labels of a
// row come from their own document (so they never cross a document boundary).
TEST(Packing, RandomisedLayoutProperties) {
  const int64_t S = 64;
  for (Packing mode : {Packing::dflash, Packing::sft, Packing::bfd}) {
    Generator gen(static_cast<uint64_t>(mode) + 11);
    const std::vector<int64_t> lengths = long_tailed(300, mode == Packing::dflash ? 90 : S, 7);
    Corpus corpus;
    corpus.form = target_form(mode);
    corpus.sources = {"mem"};
    int32_t next_token = 0;
    for (int64_t len : lengths) {
      Document d;
      for (int64_t i = 0; i < len; ++i) {
        d.input_ids.push_back(next_token++);  // token value = global index: order is checkable
        if (mode == Packing::dflash)
          d.loss_mask.push_back(static_cast<int32_t>(gen.next_int(0, 2)));
        else
          d.labels.push_back(gen.next_int(0, 4) == 0 ? kIgnoreIndex : next_token);
      }
      corpus.docs.push_back(std::move(d));
    }
    const PackPlan plan = plan_rows(corpus, {mode, S});
    const Batch b = collate(corpus, plan, all_rows(plan), /*pad_id=*/-1);
    const std::vector<int64_t> ids = b.input_ids.to_vector<int64_t>();
    const std::vector<int64_t> pos = b.position_ids.to_vector<int64_t>();
    const std::vector<int64_t> target =
        (mode == Packing::dflash ? b.loss_mask : b.labels).to_vector<int64_t>();
    const std::vector<int64_t> remaining =
        mode == Packing::dflash ? b.doc_remaining.to_vector<int64_t>() : std::vector<int64_t>{};
    std::vector<int> seen(next_token, 0);
    int64_t kept = 0;
    for (int64_t r = 0; r < b.rows(); ++r) {
      const std::vector<int64_t> lens = row(b.seq_lens, r);
      EXPECT_EQ(std::accumulate(lens.begin(), lens.end(), int64_t{0}), S);
      int64_t t = 0;
      for (size_t j = 0; j < plan.rows[r].size(); ++j) {
        const Segment& seg = plan.rows[r][j];
        const Document& doc = corpus.docs[seg.doc];
        const int64_t real = lens[j] - (j + 1 == plan.rows[r].size() ? b.num_pad[r] : 0);
        ASSERT_EQ(real, seg.length);
        for (int64_t i = 0; i < real; ++i, ++t) {
          const int64_t at = r * S + t;
          ASSERT_EQ(ids[at], doc.input_ids[i]);  // in order, from its own document
          ++seen[ids[at]];
          EXPECT_EQ(pos[at], i);
          if (mode == Packing::dflash) {
            EXPECT_EQ(remaining[at], real - 1 - i);
            EXPECT_EQ(target[at], doc.loss_mask[i]);
          } else {
            EXPECT_EQ(target[at], doc.labels[i]);
          }
        }
        kept += real;
      }
      for (; t < S; ++t) EXPECT_EQ(ids[r * S + t], -1);
    }
    EXPECT_EQ(kept, plan.tokens);
    if (mode == Packing::dflash) {  // truncation drops the tail of long documents only
      for (int64_t d = 0, first = 0; d < static_cast<int64_t>(lengths.size());
           first += lengths[d++])
        for (int64_t i = 0; i < lengths[d]; ++i) EXPECT_EQ(seen[first + i], i < S ? 1 : 0);
    } else {
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), next_token);
    }
  }
}

}  // namespace
}  // namespace sprig::data
