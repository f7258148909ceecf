// Mask specs (JSON) and dumps, the library side of `sprig mask`: every spec kind against its
// builder, bad specs with their messages, the safetensors dump's bytes and header.
#include "attention/mask_io.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tensor/safetensors.h"
#include "tests/attention/mask_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::dense_rows;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("sprig_mask_io_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(MaskIo, EveryKindMatchesItsBuilder) {
  EXPECT_EQ(dense_rows(parse_mask_spec(R"({"kind": "causal", "length": 5, "sliding_window": 3})")),
            dense_rows(causal_mask(5, 3)));
  EXPECT_EQ(
      dense_rows(parse_mask_spec(R"({"kind": "documents", "seq_lens": [4, 3], "length": 10})")),
      dense_rows(document_mask({4, 6})));
  EXPECT_EQ(dense_rows(parse_mask_spec(
                R"({"kind": "prefix_tree", "node_lengths": [2, 1, 1, 2],
                    "sample_paths": [[0, 1, 2], [0, 1, 3]]})")),
            (std::vector<std::string>{"100000", "110000", "111000", "111100", "111010", "111011"}));
  // docs/semantics.md E8, packed JetSpec with keep given as booleans and as 0/1.
  for (const char* keep : {"[true, true]", "[1, 1]"}) {
    const Mask m = parse_mask_spec(
        std::string(R"({"kind": "dflash", "ctx_len": 10, "block_size": 3, "anchors": [2, 7],
                        "causal": true, "seq_lens": [5, 5], "keep": )") +
        keep + "}");
    EXPECT_EQ(
        dense_rows(m, 10),
        (std::vector<std::string>{"1100000000|100000", "1100000000|110000", "1100000000|111000",
                                  "0000011000|000100", "0000011000|000110", "0000011000|000111"}));
  }
  const Mask windowed = parse_mask_spec(
      R"({"kind": "dflash", "ctx_len": 10, "block_size": 3, "anchors": [2, 7], "keep": [1, 1],
          "sliding_window": 4})");
  EXPECT_EQ(dense_rows(windowed, 10)[2], "0100000000|111000");
}

TEST(MaskIo, BadSpecs) {
  auto message = [](const std::string& json) {
    return testing::invalid_argument_message([&] { parse_mask_spec(json); });
  };
  EXPECT_EQ(message(R"({"kind": "dflash", "ctx_len": 10, "block_size": 3, "anchors": [2, 8],
                       "keep": [1, 1]})"),
            "[dflash_mask] anchors[1] = 8 is outside [0, max(ctx_len - block_size, 0)] = [0, 7]");
  EXPECT_EQ(message(R"({"kind": "dflash", "ctx_len": 10, "block_size": 3, "anchors": [2],
                       "keep": [1], "seq_lens": [4, 5]})"),
            "[dflash_mask] seq_lens sum to 9, expected ctx_len 10");
  EXPECT_EQ(message(R"({"kind": "documents", "seq_lens": [4, 7], "length": 10})"),
            "[document_mask] seq_lens sum to 11, more than length 10");
  EXPECT_EQ(message(R"({"kind": "prefix_tree", "node_lengths": [2, 2], "sample_paths": [[0, 5]]})"),
            "[prefix_tree_mask] sample_paths[0][1] = 5 is not a node index in [0, 2)");
  // Lengths whose sums overflow int64 (found by fuzz_mask_spec).
  EXPECT_EQ(message(R"({"kind": "documents", "seq_lens": [9223372036854775807, 1]})"),
            "[document_mask] seq_lens sum overflows int64 (9223372036854775807 + 1)");
  EXPECT_EQ(message(R"({"kind": "prefix_tree", "node_lengths": [9223372036854775807, 1],
                       "sample_paths": [[0, 1]]})"),
            "[prefix_tree_mask] node_lengths sum overflows int64 (9223372036854775807 + 1)");
  EXPECT_EQ(message(R"({"kind": "dflash", "ctx_len": 9223372036854775807,
                       "block_size": 9223372036854775807, "anchors": [0, 0], "keep": [1, 1]})"),
            "[dflash_mask] 2 blocks of 9223372036854775807 slots after a context of "
            "9223372036854775807 overflow int64");
  EXPECT_EQ(message(R"({"kind": "dflash", "ctx_len": 10, "block_size": 2, "anchors": [0],
                       "keep": [1], "seq_lens": [9223372036854775807, 1]})"),
            "[dflash_mask] seq_lens sum overflows int64 (9223372036854775807 + 1)");
  EXPECT_EQ(message(R"({"kind": "causal", "length": 4, "sliding_window": 0})"),
            "[mask] sliding_window must be >= 1, got 0");
  EXPECT_EQ(message(R"({"kind": "causal", "lenght": 4})"),
            "[mask] unknown field \"lenght\" for kind \"causal\"");
  EXPECT_EQ(message(R"({"kind": "causal"})"), "[mask] missing field \"length\"");
  EXPECT_EQ(message(R"({"kind": "causal", "length": 2.5})"),
            "[mask] field \"length\" must hold integers, got 2.5");
  // Printed as written: read as int64, 2^64 - 1 would be -1 (and 2^63 would be -2^63).
  EXPECT_EQ(message(R"({"kind": "causal", "length": 18446744073709551615})"),
            "[mask] field \"length\" = 18446744073709551615 does not fit in 64 bits");
  EXPECT_EQ(message(R"({"kind": "documents", "seq_lens": [1, 9223372036854775808]})"),
            "[mask] field \"seq_lens\" = 9223372036854775808 does not fit in 64 bits");
  EXPECT_EQ(message(R"({"kind": "documents", "seq_lens": 4})"),
            "[mask] field \"seq_lens\" must be a list");
  EXPECT_EQ(message(R"({"kind": "prefix_tree", "node_lengths": [1], "sample_paths": [0]})"),
            "[mask] field \"sample_paths\" must be a list of lists");
  EXPECT_EQ(message(R"({"kind": "dflash", "ctx_len": 4, "block_size": 1, "anchors": [0],
                       "keep": [2]})"),
            "[mask] field \"keep\" must hold booleans or 0/1, got 2");
  EXPECT_EQ(message(R"({"kind": "dflash", "ctx_len": 4, "block_size": 1, "anchors": [0],
                       "keep": [1], "causal": 1})"),
            "[mask] field \"causal\" must be true or false");
  EXPECT_EQ(message(R"({"kind": "diagonal", "length": 4})"),
            "[mask] unknown kind \"diagonal\" (expected causal, documents, prefix_tree or dflash)");
  EXPECT_EQ(message(R"([1, 2])"), "[mask] spec must be a JSON object with a string field \"kind\"");
  EXPECT_EQ(message("{").rfind("[mask] spec is not valid JSON: ", 0), 0u);
  EXPECT_EQ(message(R"({"kind": "causal", "length": 1e99999})")
                .rfind("[mask] spec is not valid JSON: ", 0),
            0u);
  EXPECT_EQ(testing::invalid_argument_message([] { load_mask_spec("/nonexistent/m.json"); }),
            "/nonexistent/m.json: cannot read the mask spec");
}

TEST(MaskIo, SafetensorsDumpIsU8Dense) {
  const Mask m =
      dflash_mask({6, 3, {1, 3}, {true, false}, false, {}, 0});  // docs/semantics.md E8 padding
  const std::string path = temp_path("dump.safetensors");
  save_mask_safetensors(m, path);
  const std::string bytes = read_bytes(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  EXPECT_EQ((8 + header_len) % 8, 0u);
  ASSERT_EQ(bytes.size(), 8 + header_len + 6 * 12);
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_len));
  EXPECT_EQ(header["mask"]["dtype"], "U8");
  EXPECT_EQ(header["mask"]["shape"], nlohmann::json({6, 12}));
  EXPECT_EQ(header["mask"]["data_offsets"], nlohmann::json({0, 72}));
  EXPECT_EQ(header["__metadata__"]["format"], "pt");
  std::string expected;
  for (const std::string& row : dense_rows(m))
    for (char c : row) expected += static_cast<char>(c == '1');
  EXPECT_EQ(bytes.substr(8 + header_len), expected);
  // The project's reader accepts the file.
  EXPECT_EQ(SafetensorsFile(path).load("mask").to_vector<int32_t>(),
            m.dense().to_vector<int32_t>());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sprig
