// Draft vocabularies: the most frequent ids (ties to the lower id, unseen ids filling up, kept
// ascending), the engines' d2t and t2d, and the file: read back, and refused when it is another
// file, maps another vocabulary or lists ids out of order.
#include "speculative/draft_vocab.h"

#include <gtest/gtest.h>

#include "tests/nn/checkpoint_fixtures.h"
#include "tests/test_util.h"

namespace sprig::speculative {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(DraftVocab, KeepsTheMostFrequentIdsAscending) {
  //                     id: 0  1  2  3  4  5  6  7
  const std::vector<int64_t> counts{0, 5, 9, 5, 0, 1, 5, 0};
  // 2 (9), then the ties at 5 by id: 1, 3.
  DraftVocabulary v = most_frequent(counts, 3);
  EXPECT_EQ(v.draft_to_target, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(v.vocab_size, 8);
  EXPECT_DOUBLE_EQ(v.coverage, 19.0 / 25);
  // Past the counted ids the lowest unseen ones fill it up.
  v = most_frequent(counts, 7);
  EXPECT_EQ(v.draft_to_target, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_DOUBLE_EQ(v.coverage, 1);
  EXPECT_EQ(error_of([&] { most_frequent(counts, 9); }),
            "[draft vocab] the draft vocabulary size must be in [1, 8] (the target's "
            "vocabulary), got 9");
}

TEST(DraftVocab, D2tIsTheOffsetAndT2dTheMembership) {
  const DraftVocabulary v{8, {1, 2, 6}};
  EXPECT_EQ(v.d2t().to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 4}));  // i + d2t[i]
  EXPECT_EQ(v.t2d().to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(draft_vocabulary_of(v.d2t(), v.t2d(), 8, "ckpt").draft_to_target, v.draft_to_target);
  EXPECT_EQ(error_of([&] {
              draft_vocabulary_of(v.d2t(), DraftVocabulary{8, {1, 2, 7}}.t2d(), 8, "ckpt");
            }),
            "[draft vocab] ckpt: t2d does not mark the target ids d2t maps to");
}

TEST(DraftVocab, FileReadsBackAndBadOnesAreRefused) {
  const testing::NamedTempDir dir("draft_vocab");
  const std::string path = dir.path + "/vocab.json";
  DraftVocabulary v{8, {1, 2, 6}};
  v.coverage = 0.5;
  testing::write_text(path, v.to_json().dump());
  const DraftVocabulary back = read_draft_vocabulary(path, 8);
  EXPECT_EQ(back.draft_to_target, v.draft_to_target);
  EXPECT_EQ(back.coverage, 0.5);
  EXPECT_EQ(error_of([&] { read_draft_vocabulary(path, 9); }),
            "[draft vocab] " + path + ": it maps a vocabulary of 8 ids, the target has 9");
  testing::write_text(path, R"({"vocab_size": 8, "draft_to_target": [1, 2]})");
  EXPECT_EQ(error_of([&] { read_draft_vocabulary(path, 8); }),
            "[draft vocab] " + path +
                ": is not a draft vocabulary (a JSON object with \"format\": "
                "\"sprig-draft-vocab\", as sprig data draft-vocab writes)");
  testing::write_text(
      path, R"({"format": "sprig-draft-vocab", "vocab_size": 8, "draft_to_target": [2, 1]})");
  EXPECT_EQ(error_of([&] { read_draft_vocabulary(path, 8); }),
            "[draft vocab] " + path +
                ": the target ids must be ascending and distinct: draft id 1 maps to 1 after 2");
  testing::write_text(
      path, R"({"format": "sprig-draft-vocab", "vocab_size": 8, "draft_to_target": "x"})");
  EXPECT_NE(error_of([&] { read_draft_vocabulary(path, 8); }).find("[draft vocab] " + path + ": "),
            std::string::npos);
}

}  // namespace
}  // namespace sprig::speculative
