// The records of `sprig eval dflash`: packed rows get per-document positions and remaining
// counts, given anchors keep every block unless told, and bad records name what is wrong.
#include "speculative/records.h"

#include <gtest/gtest.h>

namespace sprig::speculative {
namespace {

using json = nlohmann::json;
using V = std::vector<int64_t>;

TEST(DraftRecords, PackedRowsAndGivenAnchors) {
  const json rec = json::parse(
      R"({"documents": [{"input_ids": [4, 5, 6]}, {"input_ids": [7, 8], "loss_mask": [0, 1]}],
          "anchors": [0, 1], "keep": [true, false]})");
  const DraftRecord r = parse_draft_record(rec, 10, 2, "f:1");
  EXPECT_EQ(r.rows.input_ids.to_vector<int64_t>(), (V{4, 5, 6, 7, 8}));
  EXPECT_EQ(r.rows.loss_mask.to_vector<int64_t>(), (V{1, 1, 1, 0, 1}));
  EXPECT_EQ(r.rows.position_ids.to_vector<int64_t>(), (V{0, 1, 2, 0, 1}));
  EXPECT_EQ(r.rows.doc_remaining.to_vector<int64_t>(), (V{2, 1, 0, 1, 0}));
  EXPECT_EQ(r.rows.doc_lens, (std::vector<V>{{3, 2}}));
  ASSERT_TRUE(r.anchors.has_value());
  EXPECT_EQ(r.anchors->anchors.to_vector<int64_t>(), (V{0, 1}));
  EXPECT_EQ(r.anchors->keep.to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_FALSE(r.prefix_lengths.defined());
}

TEST(DraftRecords, PlainRowsSampleTheirAnchors) {
  const DraftRecord r =
      parse_draft_record(json::parse(R"({"input_ids": [1, 2, 3]})"), 10, 2, "f:1");
  EXPECT_FALSE(r.rows.packed());
  EXPECT_EQ(r.rows.loss_mask.to_vector<int64_t>(), (V{1, 1, 1}));
  EXPECT_FALSE(r.anchors.has_value());
  const DraftRecord p = parse_draft_record(
      json::parse(R"({"input_ids": [1, 2, 3, 4], "anchors": [0, 1], "prefix_lengths": [1, 2]})"),
      10, 3, "f:1");
  EXPECT_EQ(p.anchors->keep.to_vector<bool>(), (std::vector<bool>{true, true}));
  EXPECT_EQ(p.prefix_lengths.to_vector<int64_t>(), (V{1, 2}));
}

TEST(DraftRecords, BadRecordsNameTheProblem) {
  auto error = [](const std::string& text) -> std::string {
    try {
      parse_draft_record(json::parse(text), 10, 3, "f:7");
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error(R"({"input_ids": [1, 2, 3, 4], "anchors": [0], "prefix_lengths": [3]})"),
            "f:7: prefix length 3 is outside [1, 2]");
  EXPECT_EQ(error(R"({"input_ids": [1, 2, 3, 4], "anchors": [0, 1], "prefix_lengths": [1]})"),
            "f:7: \"prefix_lengths\" has 1 entries for 2 anchors");
  EXPECT_EQ(error(R"({"input_ids": [1, 2], "loss_mask": [1, 2]})"), "f:7: \"loss_mask\" holds 2");
  EXPECT_EQ(error(R"({"input_ids": []})"), "f:7: \"input_ids\" is empty");
  EXPECT_EQ(error(R"({"input_ids": [1, 2, 3], "anchors": []})"), "f:7: \"anchors\" is empty");
  EXPECT_EQ(error(R"({"input_ids": [1, 2, 3], "anchors": [0], "keep": [1]})"),
            "f:7: \"keep\" holds a non-bool 1");
  EXPECT_EQ(error(R"({"documents": [[1, 2]]})"), "f:7: documents[0]. needs \"input_ids\"");
  EXPECT_EQ(error("[1, 2]"), "f:7: a record must be a JSON object");
  // Printed as written: read as int64, 2^64 - 1 would be -1.
  EXPECT_EQ(error(R"({"input_ids": [1, 18446744073709551615]})"),
            "f:7: \"input_ids\"[1] = 18446744073709551615 does not fit in 64 bits");
  EXPECT_EQ(error(R"({"documents": [{"input_ids": [9223372036854775807]}]})"),
            "f:7: \"documents[0].input_ids\"[0] = 9223372036854775807 is not a token id in [0, "
            "10)");
  EXPECT_EQ(error(R"({"input_ids": [1, 2, 3], "anchors": [0, 9223372036854775808]})"),
            "f:7: \"anchors\"[1] = 9223372036854775808 does not fit in 64 bits");
}

}  // namespace
}  // namespace sprig::speculative
