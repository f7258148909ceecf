// End-to-end tests of `sprig data pack` (the real executable): rows equal the worked examples
// docs/semantics.md E4 (sft) and E6 (dflash) field by field, and on a random file equal the
// reference's pack_dataset (docs/semantics.md §4.3) and §2.5's DFlash packer written out naively
// here; bfd keeps every document whole exactly once and pads no more than sft or §2.4's knapsack;
// the printed padding fraction is the rows' own.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "data/packing.h"
#include "tests/data/cli_util.h"

namespace sprig::data {
namespace {

using nlohmann::json;
using testing::DataCli;
using testing::Ids;

// One line of a documents JSONL file.
std::string line(const json& record) { return record.dump() + "\n"; }

// The padding percentage `sprig data pack` printed.
double printed_padding(const std::string& summary) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(summary, m, std::regex("padding ([0-9.]+)%"))) << summary;
  return m.empty() ? -1.0 : std::stod(m[1]);
}

// Padding percentage of output rows: real tokens are those of attention_mask (dflash), or those
// seq_lens counts (sft and bfd, whose seq_lens leave the padding out).
double rows_padding(const std::vector<json>& rows, int64_t seq_len) {
  int64_t real = 0;
  for (const json& row : rows)
    for (int64_t n : row.value("attention_mask", row["seq_lens"]).get<Ids>()) real += n;
  return 100.0 * (1.0 - static_cast<double>(real) / static_cast<double>(rows.size() * seq_len));
}

Ids range(int64_t begin, int64_t end) {
  Ids v;
  for (int64_t i = begin; i < end; ++i) v.push_back(i);
  return v;
}

TEST_F(DataCli, DflashReproducesE6) {
  const std::string input =
      write("e6.jsonl", line({{"input_ids", {101, 102, 103, 104}}, {"loss_mask", {0, 1, 1, 1}}}) +
                            line({{"input_ids", {201, 202, 203}}, {"loss_mask", {0, 1, 1}}}) +
                            line({{"input_ids", range(301, 306)}, {"loss_mask", {0, 0, 1, 1, 1}}}));
  std::string summary;
  const std::vector<json> rows = pack(input, "dflash", 10, "", summary);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], json({{"input_ids", {101, 102, 103, 104, 201, 202, 203, 0, 0, 0}},
                           {"loss_mask", {0, 1, 1, 1, 0, 1, 1, 0, 0, 0}},
                           {"attention_mask", {1, 1, 1, 1, 1, 1, 1, 0, 0, 0}},
                           {"position_ids", {0, 1, 2, 3, 0, 1, 2, 3, 4, 5}},
                           {"doc_remaining", {3, 2, 1, 0, 2, 1, 0, 0, 0, 0}},
                           {"seq_lens", {4, 6}}}));
  EXPECT_EQ(rows[1], json({{"input_ids", {301, 302, 303, 304, 305, 0, 0, 0, 0, 0}},
                           {"loss_mask", {0, 0, 1, 1, 1, 0, 0, 0, 0, 0}},
                           {"attention_mask", {1, 1, 1, 1, 1, 0, 0, 0, 0, 0}},
                           {"position_ids", range(0, 10)},
                           {"doc_remaining", {4, 3, 2, 1, 0, 0, 0, 0, 0, 0}},
                           {"seq_lens", Ids{10}}}));
  // 3 + 5 pads of 20 tokens.
  EXPECT_EQ(summary, "wrote " + path("out.jsonl") +
                         ": 3 documents in 2 rows of 10 tokens, padding 40.00%\n");
}

// E4's samples in the pre-shifted form, labels = ids.
std::string e4_samples() {
  std::string text;
  for (const Ids& ids : {Ids{1, 2, 3}, Ids{4, 5, 6, 7}, Ids{8, 9}, range(10, 15)})
    text += line({{"input_ids", ids}, {"labels", ids}});
  return text;
}

TEST_F(DataCli, SftReproducesE4) {
  const std::string input = write("e4.jsonl", e4_samples());
  std::string summary;
  const std::vector<json> rows = pack(input, "sft", 10, "", summary);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], json({{"input_ids", {1, 2, 3, 4, 5, 6, 7, 8, 9, 0}},
                           {"labels", {1, 2, 3, 4, 5, 6, 7, 8, 9, -100}},
                           {"position_ids", {0, 1, 2, 0, 1, 2, 3, 0, 1, 2}},
                           {"seq_lens", {3, 4, 2}},
                           {"seq_lens_padded", {3, 4, 3}}}));
  EXPECT_EQ(rows[1], json({{"input_ids", {10, 11, 12, 13, 14, 0, 0, 0, 0, 0}},
                           {"labels", {10, 11, 12, 13, 14, -100, -100, -100, -100, -100}},
                           {"position_ids", range(0, 10)},
                           {"seq_lens", Ids{5}},
                           {"seq_lens_padded", Ids{10}}}));
  // 1 + 5 pads of 20 tokens.
  EXPECT_EQ(summary, "wrote " + path("out.jsonl") +
                         ": 4 documents in 2 rows of 10 tokens, padding 30.00%\n");
}

TEST_F(DataCli, SftE4WithSeqLen5AndMaxPacks) {
  const std::string input = write("e4.jsonl", e4_samples());
  std::string summary;
  const std::vector<json> rows = pack(input, "sft", 5, "", summary);
  ASSERT_EQ(rows.size(), 4u);
  const std::vector<Ids> ids = {{1, 2, 3, 0, 0}, {4, 5, 6, 7, 0}, {8, 9, 0, 0, 0}, range(10, 15)};
  const std::vector<Ids> seq_lens = {{3}, {4}, {2}, {5}};
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(rows[r]["input_ids"], json(ids[r])) << "row " << r;
    EXPECT_EQ(rows[r]["seq_lens"], json(seq_lens[r])) << "row " << r;
    EXPECT_EQ(rows[r]["seq_lens_padded"], json(Ids{5})) << "row " << r;
  }
  for (int max_packs : {2, 3}) {
    const std::vector<json> kept =
        pack(input, "sft", 5, "--max-packs " + std::to_string(max_packs), summary);
    ASSERT_EQ(kept.size(), static_cast<size_t>(max_packs));
    EXPECT_EQ(kept.back()["input_ids"], json(ids[max_packs - 1]));
  }
}

TEST_F(DataCli, SftShiftsUnshiftedDocuments) {
  // labels[t] = input_ids[t + 1] where loss_mask[t + 1] is 1; the last token only predicts.
  const std::string input =
      write("doc.jsonl", line({{"input_ids", {5, 6, 7, 8}}, {"loss_mask", {0, 0, 1, 1}}}));
  std::string summary;
  const std::vector<json> rows = pack(input, "sft", 4, "--pad-id 9", summary);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], json({{"input_ids", {5, 6, 7, 9}},
                           {"labels", {-100, 7, 8, -100}},
                           {"position_ids", {0, 1, 2, 3}},
                           {"seq_lens", Ids{3}},
                           {"seq_lens_padded", Ids{4}}}));
}

// A random document: unshifted ids with a loss mask (dflash) and pre-shifted labels (sft, bfd).
// Token i of document d is 1000 d + 1 + i, so a row's tokens tell which documents it holds.
struct RandomDoc {
  Ids ids, loss_mask, labels;
};

// `count` documents of long-tailed lengths in [1, 1.5 S]: most short, some longer than S.
std::vector<RandomDoc> random_docs(int64_t count, int64_t seq_len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> bit(0, 1), short_len(1, seq_len / 3),
      any_len(1, seq_len + seq_len / 2);
  std::vector<RandomDoc> docs(count);
  for (int64_t d = 0; d < count; ++d) {
    const int64_t n = rng() % 5 == 0 ? any_len(rng) : short_len(rng);
    for (int64_t i = 0; i < n; ++i) {
      docs[d].ids.push_back(1000 * d + 1 + i);
      docs[d].loss_mask.push_back(bit(rng));
      docs[d].labels.push_back(bit(rng) ? 1000 * d + 2 + i : -100);
    }
  }
  return docs;
}

// The reference's build_packed_eagle3_dataset (docs/semantics.md §4.5), as the rules read.
std::vector<json> spec_dflash_rows(const std::vector<RandomDoc>& docs, int64_t S, int64_t pad_id) {
  std::vector<json> rows;
  Ids ids, loss, attention, positions, remaining, seq_lens;
  auto flush = [&] {
    const int64_t num_pad = S - static_cast<int64_t>(ids.size()), last = positions.back();
    attention.assign(ids.size(), 1);
    for (int64_t j = 0; j < num_pad; ++j) {
      ids.push_back(pad_id);
      loss.push_back(0);
      attention.push_back(0);
      remaining.push_back(0);
      positions.push_back(std::min(last + 1 + j, S - 1));
    }
    seq_lens.back() += num_pad;
    rows.push_back({{"input_ids", ids},
                    {"loss_mask", loss},
                    {"attention_mask", attention},
                    {"position_ids", positions},
                    {"doc_remaining", remaining},
                    {"seq_lens", seq_lens}});
    for (Ids* v : {&ids, &loss, &attention, &positions, &remaining, &seq_lens}) v->clear();
  };
  for (const RandomDoc& doc : docs) {
    const int64_t len = std::min<int64_t>(doc.ids.size(), S);
    if (len == 0) continue;
    if (!ids.empty() && static_cast<int64_t>(ids.size()) + len > S) flush();
    for (int64_t i = 0; i < len; ++i) {
      ids.push_back(doc.ids[i]);
      loss.push_back(doc.loss_mask[i]);
      positions.push_back(i);
      remaining.push_back(len - 1 - i);
    }
    seq_lens.push_back(len);
  }
  if (!ids.empty()) flush();
  return rows;
}

// The reference's _pad_pack (docs/semantics.md §4.7) of documents placed back to back: positions
// restart per document, padding continues the last one's (capped at S - 1), seq_lens_padded folds
// the padding into the last.
json sft_row(const std::vector<const RandomDoc*>& docs, int64_t S, int64_t pad_id) {
  Ids ids, labels, positions, seq_lens;
  for (const RandomDoc* doc : docs) {
    ids.insert(ids.end(), doc->ids.begin(), doc->ids.end());
    labels.insert(labels.end(), doc->labels.begin(), doc->labels.end());
    for (size_t i = 0; i < doc->ids.size(); ++i) positions.push_back(static_cast<int64_t>(i) % S);
    seq_lens.push_back(static_cast<int64_t>(doc->ids.size()));
  }
  const int64_t num_pad = S - static_cast<int64_t>(ids.size()), last = positions.back();
  for (int64_t j = 0; j < num_pad; ++j) {
    ids.push_back(pad_id);
    labels.push_back(-100);
    positions.push_back(std::min(last + 1 + j, S - 1));
  }
  Ids padded = seq_lens;
  padded.back() += num_pad;
  return {{"input_ids", ids},
          {"labels", labels},
          {"position_ids", positions},
          {"seq_lens", seq_lens},
          {"seq_lens_padded", padded}};
}

// The reference's pack_dataset (docs/semantics.md §4.3; drop_long_samples, no max_packs, cp_size
// 1): the buffer is split at the previous sample boundary whenever it grows past S.
std::vector<json> spec_sft_rows(const std::vector<RandomDoc>& docs, int64_t S, int64_t pad_id) {
  std::vector<std::vector<const RandomDoc*>> packs;
  std::vector<const RandomDoc*> buffer;
  int64_t buffered = 0;
  for (const RandomDoc& doc : docs) {
    const int64_t len = static_cast<int64_t>(doc.ids.size());
    if (len > S) continue;
    buffer.push_back(&doc);
    buffered += len;
    if (buffered > S) {
      packs.emplace_back(buffer.begin(), buffer.end() - 1);
      buffer = {&doc};
      buffered = len;
    }
  }
  if (!buffer.empty()) packs.push_back(buffer);
  std::vector<json> rows;
  for (const auto& docs_of_pack : packs) rows.push_back(sft_row(docs_of_pack, S, pad_id));
  return rows;
}

std::string unshifted_jsonl(const std::vector<RandomDoc>& docs) {
  std::string text;
  for (const RandomDoc& d : docs) text += line({{"input_ids", d.ids}, {"loss_mask", d.loss_mask}});
  return text;
}

std::string shifted_jsonl(const std::vector<RandomDoc>& docs) {
  std::string text;
  for (const RandomDoc& d : docs) text += line({{"input_ids", d.ids}, {"labels", d.labels}});
  return text;
}

constexpr int64_t kSeqLen = 64, kDocs = 200, kPadId = 3;
const std::string kPadArg = "--pad-id " + std::to_string(kPadId);

int64_t count_longer(const std::vector<RandomDoc>& docs, int64_t S) {
  return std::count_if(docs.begin(), docs.end(),
                       [&](const RandomDoc& d) { return static_cast<int64_t>(d.ids.size()) > S; });
}

TEST_F(DataCli, DflashEqualsSpecOnRandomDocuments) {
  std::vector<RandomDoc> docs = random_docs(kDocs, kSeqLen, 11);
  docs[7] = docs[150] = RandomDoc{};  // empty documents are skipped
  std::string summary;
  const std::vector<json> rows =
      pack(write("docs.jsonl", unshifted_jsonl(docs)), "dflash", kSeqLen, kPadArg, summary);
  const std::vector<json> expected = spec_dflash_rows(docs, kSeqLen, kPadId);
  ASSERT_EQ(rows.size(), expected.size());
  for (size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(rows[r], expected[r]) << "row " << r;
  const int64_t truncated = count_longer(docs, kSeqLen);
  ASSERT_GT(truncated, 0);
  EXPECT_NE(summary.find(", " + std::to_string(truncated) + " truncated to " +
                         std::to_string(kSeqLen) + ", 2 empty ones"),
            std::string::npos)
      << summary;
  EXPECT_NEAR(printed_padding(summary), rows_padding(rows, kSeqLen), 0.005);
}

TEST_F(DataCli, SftEqualsSpecOnRandomDocuments) {
  const std::vector<RandomDoc> docs = random_docs(kDocs, kSeqLen, 12);
  std::string summary;
  const std::vector<json> rows =
      pack(write("docs.jsonl", shifted_jsonl(docs)), "sft", kSeqLen, kPadArg, summary);
  const std::vector<json> expected = spec_sft_rows(docs, kSeqLen, kPadId);
  ASSERT_EQ(rows.size(), expected.size());
  for (size_t r = 0; r < rows.size(); ++r) EXPECT_EQ(rows[r], expected[r]) << "row " << r;
  EXPECT_NE(summary.find(std::to_string(count_longer(docs, kSeqLen)) + " longer ones dropped"),
            std::string::npos)
      << summary;
  EXPECT_NEAR(printed_padding(summary), rows_padding(rows, kSeqLen), 0.005);
}

TEST_F(DataCli, BfdKeepsEveryDocumentOnceAndPadsNoMoreThanSftOrTheKnapsack) {
  const std::vector<RandomDoc> docs = random_docs(kDocs, kSeqLen, 13);
  const std::string input = write("docs.jsonl", shifted_jsonl(docs));
  std::string bfd_summary, sft_summary;
  const std::vector<json> rows = pack(input, "bfd", kSeqLen, kPadArg, bfd_summary);
  const size_t sft_rows = pack(input, "sft", kSeqLen, kPadArg, sft_summary).size();

  // Each row's documents, told by their first tokens, laid out as the reference's packs are
  // (docs/semantics.md §4.3).
  std::vector<int> placed(docs.size(), 0);
  for (size_t r = 0; r < rows.size(); ++r) {
    const Ids ids = rows[r]["input_ids"].get<Ids>();
    std::vector<const RandomDoc*> in_row;
    int64_t t = 0;
    for (int64_t len : rows[r]["seq_lens"].get<Ids>()) {
      const int64_t d = (ids.at(t) - 1) / 1000;
      ASSERT_TRUE(d >= 0 && d < kDocs) << "row " << r << " token " << t;
      ++placed[d];
      in_row.push_back(&docs[d]);
      t += len;
    }
    EXPECT_EQ(rows[r], sft_row(in_row, kSeqLen, kPadId)) << "row " << r;
  }
  std::vector<int64_t> lengths;
  for (size_t d = 0; d < docs.size(); ++d) {
    const bool fits = static_cast<int64_t>(docs[d].ids.size()) <= kSeqLen;
    EXPECT_EQ(placed[d], fits ? 1 : 0) << "document " << d;
    if (fits) lengths.push_back(static_cast<int64_t>(docs[d].ids.size()));
  }
  // Same tokens in fewer (or as many) rows: never more padding.
  const size_t knapsack_rows = fit_decreasing(lengths, kSeqLen, FitRule::worst).size();
  EXPECT_LT(rows.size(), sft_rows) << "a random file where bfd gains nothing tests little";
  EXPECT_LE(rows.size(), knapsack_rows);
  EXPECT_LE(printed_padding(bfd_summary), printed_padding(sft_summary));
  EXPECT_NEAR(printed_padding(bfd_summary), rows_padding(rows, kSeqLen), 0.005);
}

}  // namespace
}  // namespace sprig::data
