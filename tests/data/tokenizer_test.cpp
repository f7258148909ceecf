// Tokenizer (data/tokenizer.h) against Hugging Face `tokenizers` on the fixtures of
// tests/golden/tokenizer (tests/golden/make_tokenizer_golden.py): the ids of every line of the
// corpus and of the whole file, decode of those ids and of id sequences that split characters,
// UTF-8 repair, the batch encoder, and the loader's refusals of what it does not implement.
#include "data/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/cli_run.h"
#include "tests/test_util.h"

namespace sprig::data {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

const std::string kDir = testing::source_dir() + "/tests/golden/tokenizer/";

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

const Tokenizer& golden() {
  static const Tokenizer t = Tokenizer::load(kDir);
  return t;
}

// corpus.txt's lines (raw bytes, some not UTF-8), then the whole file.
std::vector<std::string> corpus_cases() {
  const std::string text = testing::file_text(kDir + "corpus.txt");
  std::vector<std::string> cases;
  for (size_t start = 0; start < text.size();) {
    const size_t end = text.find('\n', start);
    cases.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  cases.push_back(text);
  return cases;
}

TEST(Tokenizer, EncodesEveryCorpusLineAsHuggingFaceDoes) {
  const std::vector<std::string> cases = corpus_cases();
  const std::vector<json> expected = read_jsonl(kDir + "encode_expected.jsonl");
  ASSERT_EQ(cases.size(), expected.size());
  ASSERT_GE(cases.size(), 170u);
  size_t matched = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Ids ids = golden().encode(cases[i]);
    EXPECT_EQ(ids, expected[i]["ids"].get<Ids>()) << "line " << i + 1 << ": " << cases[i];
    matched += ids == expected[i]["ids"].get<Ids>();
    // decode(encode(x)) is x repaired and NFC-normalised (lstrip/rstrip tokens aside): HF's text.
    EXPECT_EQ(golden().decode(ids), expected[i]["decoded"].get<std::string>()) << "line " << i + 1;
  }
  EXPECT_EQ(matched, cases.size());
}

TEST(Tokenizer, BatchEncodeOnThreadsEqualsOneByOne) {
  const std::vector<std::string> cases = corpus_cases();
  std::vector<std::string_view> views;
  for (int repeat = 0; repeat < 4; ++repeat)
    for (const std::string& c : cases) views.push_back(c);
  const std::vector<Ids> batch = golden().encode_batch(views, 3);
  ASSERT_EQ(batch.size(), views.size());
  for (size_t i = 0; i < views.size(); ++i) EXPECT_EQ(batch[i], golden().encode(views[i])) << i;
}

TEST(Tokenizer, DecodesAsHuggingFaceDoes) {
  const std::vector<json> expected = read_jsonl(kDir + "decode_expected.jsonl");
  ASSERT_GE(expected.size(), 100u);
  for (const json& e : expected)
    EXPECT_EQ(golden().decode(e["ids"].get<Ids>(), e["skip_special_tokens"].get<bool>()),
              e["text"].get<std::string>())
        << e.dump();
}

TEST(Tokenizer, KnowsItsTokens) {
  EXPECT_EQ(golden().vocab_size(), 2408);
  EXPECT_EQ(golden().token_id("<|im_start|>"), 2401);
  EXPECT_EQ(golden().token_id("<think>"), 2405);
  EXPECT_EQ(golden().token_id("\xC4\x8A"), 198);  // "Ċ", the byte-level newline
  EXPECT_EQ(golden().token_id("no such token"), std::nullopt);
  // Ids outside the vocabulary decode to nothing, as in HF.
  EXPECT_EQ(golden().decode({-1, 2408, 1 << 30}), "");
  const Ids ids = golden().encode("a<|im_end|>b");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], 2402);
  EXPECT_EQ(golden().decode(ids, /*skip_special_tokens=*/true), "ab");
}

TEST(Tokenizer, RecordsWhereAddedTokensMatched) {
  std::vector<int32_t> ids;
  std::vector<AddedMatch> added;
  golden().encode_into("hi <|im_start|>x   <|mask|> y", ids, &added);
  ASSERT_EQ(added.size(), 2u);
  EXPECT_EQ(added[0].byte, 3u);
  EXPECT_EQ(ids[added[0].index], 2401);
  EXPECT_EQ(added[1].byte, 16u);  // lstrip: the match starts at the spaces before <|mask|>
  EXPECT_EQ(ids[added[1].index], 2407);
  EXPECT_EQ(added[1].index, ids.size() - 2);  // rstrip took the space before "y"
}

TEST(Tokenizer, RepairsInvalidUtf8OnePerMaximalSubpart) {
  EXPECT_EQ(repair_utf8("ok"), "ok");
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(repair_utf8("a\xFF"
                        "b"),
            "a" + r + "b");
  EXPECT_EQ(repair_utf8("\xE4\xB8"), r);                      // a truncated 3-byte sequence: one
  EXPECT_EQ(repair_utf8("\xF0\x80\x80"), r + r + r);          // F0 80 is never well-formed: three
  EXPECT_EQ(repair_utf8("\xED\xA0\x80"), r + r + r);          // a surrogate: three
  EXPECT_EQ(repair_utf8("\xC3\x28"), r + "(");                // the bad byte is read again
  EXPECT_EQ(repair_utf8("\xF4\x90\x80\x80"), r + r + r + r);  // beyond U+10FFFF
  EXPECT_EQ(repair_utf8("\xF0\x9F\x98"), r);                  // a truncated emoji: one
}

// A minimal byte-level BPE tokenizer.json with `edit` applied to it.
std::string tiny_json(const std::function<void(json&)>& edit) {
  json vocab = json::object();
  const std::string letters = "abc";
  for (size_t i = 0; i < letters.size(); ++i) vocab[std::string(1, letters[i])] = i;
  vocab["ab"] = 3;
  json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"added_tokens", json::array()}};
  edit(j);
  return j.dump();
}

std::string load_error(const std::function<void(json&)>& edit) {
  try {
    Tokenizer::from_json(tiny_json(edit), "t.json");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(Tokenizer, TinyFileEncodesByMergeRank) {
  const Tokenizer t = Tokenizer::from_json(tiny_json([](json&) {}), "t.json");
  EXPECT_EQ(t.encode("abcab"), (Ids{3, 2, 3}));  // "abcab" is one word: GPT-2's regex, no space
  EXPECT_EQ(t.encode("ddd"), Ids{});             // bytes the vocabulary lacks vanish (no unk)
  const Tokenizer ignore = Tokenizer::from_json(tiny_json([](json& j) {
                                                  j["model"]["ignore_merges"] = true;
                                                  j["model"]["vocab"]["abc"] = 4;
                                                }),
                                                "t.json");
  EXPECT_EQ(ignore.encode("abc"), Ids{4});  // a whole word in the vocabulary skips the merges
}

TEST(Tokenizer, RefusesWhatItDoesNotImplementByName) {
  EXPECT_EQ(load_error([](json& j) { j.erase("model"); }),
            "[tokenizer] t.json: missing \"model\" (the BPE vocabulary and merges)");
  EXPECT_EQ(load_error([](json& j) { j["model"]["type"] = "WordPiece"; }),
            "[tokenizer] t.json: unsupported model type 'WordPiece' (supported: BPE)");
  EXPECT_EQ(load_error([](json& j) { j["model"]["merges"] = {"a z"}; }),
            "[tokenizer] t.json: model.merges[0] \"a z\": \"z\" is not in the vocabulary");
  EXPECT_EQ(load_error([](json& j) { j["model"]["merges"] = {"b c"}; }),
            "[tokenizer] t.json: model.merges[0] \"b c\": \"bc\" is not in the vocabulary");
  EXPECT_EQ(load_error([](json& j) { j["model"]["merges"] = {"abc"}; }),
            "[tokenizer] t.json: model.merges[0] must be two tokens separated by one space, got "
            "\"abc\"");
  EXPECT_EQ(load_error([](json& j) {
              j["model"]["merges"] = {{1, 2}};
            }),
            "[tokenizer] t.json: model.merges[0] must be \"a b\" or [\"a\", \"b\"], got [1,2]");
  EXPECT_EQ(load_error([](json& j) { j["model"]["vocab"]["a"] = -3; }),
            "[tokenizer] t.json: model.vocab[\"a\"] must be a token id (an integer in [0, 2^24)), "
            "got -3");
  // An absurd id is refused before decode's table of one entry per id is allocated.
  EXPECT_EQ(load_error([](json& j) { j["model"]["vocab"]["c"] = 1000000000; }),
            "[tokenizer] t.json: model.vocab[\"c\"] must be a token id (an integer in [0, 2^24)), "
            "got 1000000000");
  EXPECT_EQ(load_error([](json& j) {
              j["added_tokens"] = {{{"id", 16777216}, {"content", "<x>"}, {"special", true}}};
            }),
            "[tokenizer] t.json: added_tokens[0].id must be a token id (an integer in [0, 2^24)), "
            "got 16777216");
  EXPECT_EQ(load_error([](json& j) { j["model"].erase("merges"); }),
            "[tokenizer] t.json: missing \"merges\" in model");
  EXPECT_EQ(load_error([](json& j) { j["model"]["byte_fallback"] = true; }),
            "[tokenizer] t.json: unsupported BPE byte_fallback: true");
  EXPECT_EQ(load_error([](json& j) {
              j["normalizer"] = {{"type", "Lowercase"}};
            }),
            "[tokenizer] t.json: unsupported normalizer 'Lowercase' (supported: NFC, or none)");
  EXPECT_EQ(load_error([](json& j) {
              j["pre_tokenizer"] = {{"type", "Whitespace"}};
            }),
            "[tokenizer] t.json: unsupported pre-tokenizer 'Whitespace' (supported: Split, "
            "ByteLevel, Sequence)");
  EXPECT_EQ(load_error([](json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; }),
            "[tokenizer] t.json: unsupported ByteLevel pre-tokenizer with add_prefix_space: true");
  EXPECT_EQ(load_error([](json& j) {
              j["pre_tokenizer"] = {
                  {"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Removed"}};
            }),
            "[tokenizer] t.json: unsupported Split behavior \"Removed\" (supported: Isolated)");
  EXPECT_EQ(load_error([](json& j) {
              j["pre_tokenizer"] = {{"type", "Sequence"},
                                    {"pretokenizers",
                                     {{{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}},
                                      {{"type", "ByteLevel"}, {"add_prefix_space", false}}}}};
            }),
            "[tokenizer] t.json: the split regex does not compile (missing closing parenthesis "
            "at offset 2): (a");
  EXPECT_EQ(load_error([](json& j) { j["pre_tokenizer"] = nullptr; }),
            "[tokenizer] t.json: the pre-tokenizer has no ByteLevel step (only byte-level BPE is "
            "supported)");
  EXPECT_EQ(load_error([](json& j) {
              j["decoder"] = {{"type", "WordPiece"}};
            }),
            "[tokenizer] t.json: unsupported decoder 'WordPiece' (supported: ByteLevel)");
  EXPECT_EQ(load_error([](json& j) {
              j["added_tokens"] = {{{"id", 9}, {"content", "<x>"}, {"single_word", true}}};
            }),
            "[tokenizer] t.json: added_tokens[0] (<x>): single_word: true is not supported");
  EXPECT_EQ(load_error([](json& j) {
              j["added_tokens"] = {{{"id", 9}, {"content", ""}}};
            }),
            "[tokenizer] t.json: added_tokens[0].content must be a non-empty string, got \"\"");
  EXPECT_EQ(load_error([](json& j) { j["model"]["vocab"]["\xE4\xB8\x80"] = 7; }),
            "[tokenizer] t.json: model.vocab[\"\xE4\xB8\x80\"] is not a byte-level token (a "
            "character outside the byte alphabet)");
  // An id names one token: decoding it would otherwise pick one of them silently.
  EXPECT_EQ(load_error([](json& j) { j["model"]["vocab"]["c"] = 0; }),
            "[tokenizer] t.json: model.vocab gives id 0 to two tokens, \"a\" and \"c\"");
  EXPECT_EQ(load_error([](json& j) {
              j["added_tokens"] = {{{"id", 1}, {"content", "<x>"}}};
            }),
            "[tokenizer] t.json: added_tokens[0] (<x>) takes id 1, model.vocab's \"b\"");
  EXPECT_EQ(
      load_error([](json& j) {
        j["added_tokens"] = {{{"id", 7}, {"content", "<x>"}}, {{"id", 7}, {"content", "<y>"}}};
      }),
      "[tokenizer] t.json: added_tokens[1] (<y>) takes id 7, already added_tokens' \"<x>\"");
  EXPECT_EQ(load_error([](json& j) {  // an added token repeating its vocabulary entry is GPT-2's
              j["added_tokens"] = {{{"id", 3}, {"content", "ab"}}};
            }),
            "no error");
  try {
    Tokenizer::from_json("{\"model\": ", "t.json");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[tokenizer] t.json: not valid JSON (", 0), 0u)
        << e.what();
  }
  EXPECT_THROW(Tokenizer::load("/nonexistent/dir"), std::invalid_argument);
}

}  // namespace
}  // namespace sprig::data
