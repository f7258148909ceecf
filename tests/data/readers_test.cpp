// Record readers: documents and rollouts JSONL, llm.c token shards; every bad-input message.
#include "data/readers.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/data/data_test_util.h"

namespace sprig::data {
namespace {

using testing::TempFile;
using Ints = std::vector<int32_t>;

std::vector<Document> read_docs(const std::string& path, TargetForm form,
                                ReadOptions options = {}) {
  BadRecords bad;
  std::vector<Document> docs;
  read_documents(path, form, options, bad, [&](Document&& d) { docs.push_back(std::move(d)); });
  return docs;
}

// The message of the error reading a one-document file with this content (empty if none).
std::string document_error(const std::string& content, int64_t vocab_size = 0,
                           TargetForm form = TargetForm::labels) {
  TempFile f(content);
  try {
    read_docs(f.path(), form, {vocab_size});
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    return what.starts_with(f.path()) ? "FILE" + what.substr(f.path().size()) : what;
  }
  return "";
}

TEST(Readers, DocumentsUnshiftedForm) {
  TempFile f(
      "{\"input_ids\": [1, 2, 3], \"loss_mask\": [0, 1, 1]}\n"
      "\n"
      "{\"input_ids\": [4, 5]}\n"
      "{\"input_ids\": [6, 7], \"loss_mask\": [true, false]}");  // no newline at the end: fine
  const std::vector<Document> docs = read_docs(f.path(), TargetForm::loss_mask);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].input_ids, (Ints{1, 2, 3}));
  EXPECT_EQ(docs[0].loss_mask, (Ints{0, 1, 1}));
  EXPECT_TRUE(docs[1].loss_mask.empty());  // all supervised
  EXPECT_EQ(docs[2].loss_mask, (Ints{1, 0}));
  EXPECT_EQ(docs[1].record, 3);  // line numbers count blank lines
  EXPECT_TRUE(docs[0].labels.empty());
}

TEST(Readers, DocumentsShiftedForLabels) {
  TempFile f(
      "{\"input_ids\": [1, 2, 3], \"loss_mask\": [0, 1, 0]}\n"
      "{\"input_ids\": [4, 5]}\n"
      "{\"input_ids\": [1, 2, 3], \"labels\": [2, 3, -100]}\n"
      "{\"input_ids\": [1, 2, 3], \"labels\": [2, 3, 9], \"loss_mask\": [1, 0, 1]}\n");
  const std::vector<Document> docs = read_docs(f.path(), TargetForm::labels);
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0].input_ids, (Ints{1, 2}));
  EXPECT_EQ(docs[0].labels, (Ints{2, -100}));  // labels[t] = ids[t+1] where loss_mask[t+1]
  EXPECT_EQ(docs[1].input_ids, (Ints{4}));
  EXPECT_EQ(docs[1].labels, (Ints{5}));
  EXPECT_EQ(docs[2].input_ids, (Ints{1, 2, 3}));  // pre-shifted: kept as is
  EXPECT_EQ(docs[2].labels, (Ints{2, 3, -100}));
  EXPECT_EQ(docs[3].labels, (Ints{2, -100, 9}));  // loss_mask zeroes pre-shifted labels
  for (const Document& d : docs) EXPECT_TRUE(d.loss_mask.empty());
}

TEST(Readers, DocumentErrors) {
  EXPECT_EQ(document_error("{\"input_ids\": [1, 2, 3, 4, 5, 6], \"loss_mask\": [1, 1, 1, 1, 1]}\n"),
            "FILE:1: \"loss_mask\" has 5 entries but \"input_ids\" has 6");
  EXPECT_EQ(document_error("{\"loss_mask\": [1]}\n"), "FILE:1: missing \"input_ids\"");
  // A misspelt key is refused, naming the closest known one (a "lossmask" would otherwise leave
  // every token supervised).
  EXPECT_EQ(document_error("{\"input_id\": [1]}\n"),
            "FILE:1: unknown key \"input_id\" (did you mean \"input_ids\"?)");
  EXPECT_EQ(document_error("{\"input_ids\": [1, 2], \"lossmask\": [0, 1]}\n"),
            "FILE:1: unknown key \"lossmask\" (did you mean \"loss_mask\"?)");
  EXPECT_EQ(document_error("{\"input_ids\": 5}\n"),
            "FILE:1: \"input_ids\" must be an array of integers");
  EXPECT_EQ(document_error("{\"input_ids\": [1, \"a\"]}\n"),
            "FILE:1: \"input_ids\"[1] is not an integer: \"a\"");
  EXPECT_EQ(document_error("{\"input_ids\": [1, 2.5]}\n"),
            "FILE:1: \"input_ids\"[1] is not an integer: 2.5");
  EXPECT_EQ(document_error("{\"input_ids\": [1, 12]}\n", /*vocab_size=*/10),
            "FILE:1: \"input_ids\"[1] = 12 is not a token id in [0, 10)");
  EXPECT_EQ(document_error("{\"input_ids\": [-3]}\n"),
            "FILE:1: \"input_ids\"[0] = -3 is not a token id (negative)");
  EXPECT_EQ(document_error("{\"input_ids\": [1], \"labels\": [-5]}\n"),
            "FILE:1: \"labels\"[0] = -5 is not a token id (negative)");
  // Printed as written, the 32-bit range exactly: read as int64, 2^64 - 1 would be -1.
  EXPECT_EQ(document_error("{\"input_ids\": [1, 18446744073709551615]}\n", /*vocab_size=*/10),
            "FILE:1: \"input_ids\"[1] = 18446744073709551615 does not fit in 32 bits");
  EXPECT_EQ(document_error("{\"input_ids\": [2147483648]}\n"),
            "FILE:1: \"input_ids\"[0] = 2147483648 does not fit in 32 bits");
  EXPECT_EQ(document_error("{\"input_ids\": [1], \"labels\": [-2147483649]}\n"),
            "FILE:1: \"labels\"[0] = -2147483649 does not fit in 32 bits");
  EXPECT_EQ(document_error("{\"input_ids\": [2147483647]}\n", /*vocab_size=*/10),
            "FILE:1: \"input_ids\"[0] = 2147483647 is not a token id in [0, 10)");
  EXPECT_EQ(document_error("{\"input_ids\": [1], \"labels\": [1, 2]}\n"),
            "FILE:1: \"labels\" has 2 entries but \"input_ids\" has 1");
  EXPECT_EQ(document_error("{\"input_ids\": [1], \"loss_mask\": [2]}\n"),
            "FILE:1: \"loss_mask\"[0] = 2 is not 0 or 1");
  EXPECT_EQ(document_error("[1, 2]\n"), "FILE:1: expected a JSON object, got array");
  EXPECT_EQ(document_error("{\"input_ids\": [1]}\n{\"input_ids\": [1,}\n"),
            "FILE:2: malformed JSON at column 18: unexpected '}'; expected '[', '{', or a literal");
  EXPECT_EQ(document_error("{\"input_ids\": [1e99999]}\n"),
            "FILE:1: the number 1e99999 is out of range");
  // Strict: a key twice (the last would win silently) and a NUL byte (the line would end there).
  EXPECT_EQ(document_error("{\"input_ids\": [1], \"input_ids\": [2, 3]}\n"),
            "FILE:1: key \"input_ids\" appears twice in one object");
  EXPECT_EQ(document_error(std::string("{\"input_ids\": [1]}\0{\"input_ids\": [2]}\n", 38)),
            "FILE:1: a NUL byte at column 19 (JSON is text)");
  EXPECT_EQ(document_error("{\"input_ids\": [1]}\n{\"input_ids\": [2"),
            "FILE:2: truncated last line (no newline at the end, not valid JSON)");
  EXPECT_EQ(document_error("{\"input_ids\": [1], \"labels\": [2]}\n", 0, TargetForm::loss_mask),
            "FILE:1: dflash packing needs unshifted documents (\"input_ids\" with an optional "
            "\"loss_mask\"), this record has \"labels\"");
  EXPECT_EQ(document_error("{\"input_ids\": [1, 2]}\n", 0, TargetForm::loss_mask), "");
  EXPECT_THROW(read_docs("/nonexistent/docs.jsonl", TargetForm::labels), std::invalid_argument);
}

TEST(Readers, SkipBadRecordsCountsAndReports) {
  TempFile f(
      "{\"input_ids\": [1, 2]}\n"
      "{\"input_ids\": [1, 2], \"loss_mask\": [1]}\n"
      "{\"input_ids\": [3, 4]}\n"
      "{\"input_ids\": [99]}\n"
      "{\"input_ids\": [5");
  BadRecords bad;
  std::vector<Document> docs;
  read_documents(f.path(), TargetForm::labels, {/*vocab_size=*/50, -1, /*skip=*/true}, bad,
                 [&](Document&& d) { docs.push_back(std::move(d)); });
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[1].input_ids, (Ints{3}));
  EXPECT_EQ(bad.count, 3);
  ASSERT_EQ(bad.first.size(), 3u);
  EXPECT_EQ(bad.first[0], f.path() + ":2: \"loss_mask\" has 1 entries but \"input_ids\" has 2");
  EXPECT_EQ(bad.first[2],
            f.path() + ":5: truncated last line (no newline at the end, not valid JSON)");
  EXPECT_EQ(bad.summary(), "skipped 3 bad records (" + bad.first[0] + "; " + bad.first[1] + "; " +
                               bad.first[2] + ")");
  bad.add("one more");
  EXPECT_EQ(bad.count, 4);
  EXPECT_TRUE(bad.summary().ends_with("; ...)"));
  EXPECT_EQ(BadRecords().summary(), "");
}

TEST(Readers, RolloutsFoldedWithErrors) {
  TempFile f("{\"prompt_ids\": [1, 2], \"completions\": [[3, 4], [5]]}\n");
  BadRecords bad;
  std::vector<Document> docs;
  read_rollouts(f.path(), {}, bad, [&](Document&& d) { docs.push_back(std::move(d)); });
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].input_ids, (Ints{1, 2, 3, 4, 5}));
  EXPECT_EQ(docs[0].labels, (Ints{-100, -100, 4, -100, -100}));
  EXPECT_EQ(docs[0].node_lengths, (Ints{2, 2, 1}));

  auto error = [](const std::string& content, int64_t vocab_size = 0) {
    TempFile g(content);
    BadRecords unused;
    try {
      read_rollouts(g.path(), {vocab_size}, unused, [](Document&&) {});
    } catch (const std::invalid_argument& e) {
      return std::string(e.what()).substr(g.path().size());
    }
    return std::string();
  };
  EXPECT_EQ(error("{\"prompt_ids\": [1], \"completions\": []}\n"),
            ":1: [fold] a rollout group needs at least one completion");
  EXPECT_EQ(error("{\"prompt_ids\": [1], \"completions\": [[2], []]}\n"),
            ":1: [fold] completion 1 is empty");
  EXPECT_EQ(error("{\"prompt_ids\": [1]}\n"), ":1: missing \"completions\"");
  // Without a prompt a group folds (each completion alone), unless its first tokens are to be
  // supervised: no position predicts them.
  const std::string no_prompt = "{\"prompt_ids\": [], \"completions\": [[2, 3]]}\n";
  EXPECT_EQ(error(no_prompt), "");
  {
    TempFile g(no_prompt);
    BadRecords unused;
    ReadOptions first;
    first.supervise_first_token = true;
    try {
      read_rollouts(g.path(), first, unused, [](Document&&) {});
      ADD_FAILURE() << "an empty prompt with supervise_first_token was read";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).substr(g.path().size()),
                ":1: [fold] a group without a prompt has no position to predict its completions' "
                "first tokens from: supervise_first_token cannot apply (give the prompt, or leave "
                "supervise_first_token off)");
    }
  }
  EXPECT_EQ(error("{\"prompt_ids\": [1], \"completions\": [[2]], \"advantage\": [1.0]}\n"),
            ":1: unknown key \"advantage\" (did you mean \"advantages\"?)");
  EXPECT_EQ(error("{\"prompt_ids\": [1], \"completions\": 3}\n"),
            ":1: \"completions\" must be an array");
  EXPECT_EQ(error("{\"prompt_ids\": [1], \"completions\": [[2], [3, 8]]}\n", 8),
            ":1: \"completions\"[1][1] = 8 is not a token id in [0, 8)");
  // Policy-gradient fields.
  const std::string group = "{\"prompt_ids\": [1], \"completions\": [[2, 3], [4]], ";
  EXPECT_EQ(error(group + "\"advantages\": [1.5]}\n"),
            ":1: [fold] 1 advantages for 2 completions (give one per completion)");
  EXPECT_EQ(error(group + "\"advantages\": [1, \"x\"]}\n"),
            ":1: \"advantages\"[1] is not a number: \"x\"");
  EXPECT_EQ(error(group + "\"advantages\": 1}\n"),
            ":1: \"advantages\" must be an array of numbers");
  EXPECT_EQ(error(group + "\"old_logprobs\": [[-1, -2], [-0.5, -1]]}\n"),
            ":1: [fold] completion 1 has 1 tokens but 2 old log-probs");
  EXPECT_EQ(error(group + "\"old_logprobs\": [[-1, 2], [-0.5]]}\n"),
            ":1: [fold] old log-prob 1 of completion 0 = 2.000000 is not a log-probability (finite "
            "and <= 0)");
  EXPECT_EQ(error(group + "\"old_logprobs\": [-1, -2]}\n"),
            ":1: \"old_logprobs\"[0] must be an array of numbers");
  TempFile with(group + "\"advantages\": [1.5, -0.5], \"old_logprobs\": [[-1, -2], [-0.5]]}\n");
  docs.clear();
  read_rollouts(with.path(), {}, bad, [&](Document&& d) { docs.push_back(std::move(d)); });
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].advantages, (std::vector<float>{0, 1.5f, 1.5f, -0.5f}));
  EXPECT_EQ(docs[0].old_logprobs, (std::vector<float>{0, -1, -2, -0.5f}));
}

// An llm.c token shard holding `tokens` (version 2: uint32, version 1: uint16).
std::string shard_bytes(const std::vector<uint32_t>& tokens, int32_t version = 2,
                        int32_t magic = 20240520, int64_t count = -1) {
  int32_t header[256] = {magic, version, static_cast<int32_t>(count < 0 ? tokens.size() : count)};
  std::string bytes(reinterpret_cast<const char*>(header), sizeof header);
  for (uint32_t t : tokens) {
    if (version == 1) {
      const uint16_t v = static_cast<uint16_t>(t);
      bytes.append(reinterpret_cast<const char*>(&v), 2);
    } else {
      bytes.append(reinterpret_cast<const char*>(&t), 4);
    }
  }
  return bytes;
}

std::vector<Document> read_shard_docs(const std::string& path, TargetForm form, ReadOptions options,
                                      BadRecords& bad) {
  std::vector<Document> docs;
  read_shard(path, form, options, bad, [&](Document&& d) { docs.push_back(std::move(d)); });
  return docs;
}

TEST(Readers, ShardDocumentsSplitAtEndOfText) {
  // llm.c layout: an end-of-text id before every document; a repeated one closes nothing.
  const std::vector<uint32_t> tokens = {50, 1, 2, 50, 3, 50, 50, 4, 5};
  for (int32_t version : {1, 2}) {
    TempFile f(shard_bytes(tokens, version), ".bin");
    BadRecords bad;
    std::vector<Document> docs = read_shard_docs(f.path(), TargetForm::loss_mask, {0, 50}, bad);
    ASSERT_EQ(docs.size(), 3u);
    EXPECT_EQ(docs[0].input_ids, (Ints{1, 2, 50}));
    EXPECT_EQ(docs[1].input_ids, (Ints{3, 50}));
    EXPECT_EQ(docs[2].input_ids, (Ints{4, 5}));
    EXPECT_TRUE(docs[0].loss_mask.empty());
    EXPECT_EQ(docs[2].record, 2);
    docs = read_shard_docs(f.path(), TargetForm::labels, {0, 50}, bad);
    ASSERT_EQ(docs.size(), 3u);
    EXPECT_EQ(docs[0].input_ids, (Ints{1, 2}));
    EXPECT_EQ(docs[0].labels, (Ints{2, 50}));
    EXPECT_EQ(docs[2].labels, (Ints{5}));
  }
}

TEST(Readers, ShardErrors) {
  auto error = [](const std::string& bytes, ReadOptions options = {0, 50}) {
    TempFile f(bytes, ".bin");
    BadRecords bad;
    try {
      read_shard_docs(f.path(), TargetForm::labels, options, bad);
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      return what.starts_with(f.path()) ? "FILE" + what.substr(f.path().size()) : what;
    }
    return std::string();
  };
  EXPECT_EQ(error(shard_bytes({1, 2}, 2, /*magic=*/7)),
            "FILE: not a token shard (magic 7, expected 20240520)");
  EXPECT_EQ(error(shard_bytes({1, 2}, /*version=*/3)),
            "FILE: unsupported token shard version 3 (1 = uint16 tokens, 2 = uint32 tokens)");
  EXPECT_EQ(error(shard_bytes({1, 2}, 2, 20240520, /*count=*/3)),
            "FILE: truncated token shard: the header promises 3 tokens (1036 bytes) but the file "
            "holds 1032 bytes");
  EXPECT_EQ(error("short"), "FILE: not a token shard (5 bytes, shorter than the 1024-byte header)");
  EXPECT_EQ(error(shard_bytes({1, 50, 2, 99, 50}), {/*vocab_size=*/60, 50}),
            "FILE document 1: token 3 (id 99) is not a token id in [0, 60)");
  EXPECT_EQ(error(shard_bytes({1, 2}), {0, /*eot_id=*/-1}), "[data] token shards need eot_id");

  TempFile f(shard_bytes({1, 50, 2, 99, 50, 3, 4}), ".bin");
  BadRecords bad;
  const std::vector<Document> docs =
      read_shard_docs(f.path(), TargetForm::loss_mask, {60, 50, /*skip=*/true}, bad);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[1].input_ids, (Ints{3, 4}));
  EXPECT_EQ(docs[1].record, 2);
  EXPECT_EQ(bad.count, 1);
}

TEST(Readers, LoadCorpusFromSeveralFiles) {
  TempFile a("{\"input_ids\": [1, 2, 3]}\n"), b("\n{\"input_ids\": [4, 5]}\n");
  BadRecords bad;
  const Corpus c = load_corpus({a.path(), b.path()}, DataFormat::documents, Packing::sft, {}, bad);
  ASSERT_EQ(c.docs.size(), 2u);
  EXPECT_EQ(c.form, TargetForm::labels);
  EXPECT_FALSE(c.folded);
  EXPECT_EQ(c.where(c.docs[1]), b.path() + ":2");
  EXPECT_EQ(c.docs[1].labels, (Ints{5}));
  EXPECT_THROW(load_corpus({a.path()}, DataFormat::documents, Packing::fold, {}, bad),
               std::invalid_argument);
  EXPECT_THROW(load_corpus({a.path()}, DataFormat::rollouts, Packing::sft, {}, bad),
               std::invalid_argument);
  EXPECT_THROW(format_from_name("parquet"), std::invalid_argument);
}

}  // namespace
}  // namespace sprig::data
