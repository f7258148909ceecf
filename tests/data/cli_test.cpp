// End-to-end tests of `sprig data fold` and `sprig data dump` (the real executable), and of what
// every `sprig data` subcommand does with bad input: folded groups equal docs/semantics.md E1 and
// E2 field by field; dump writes exactly the DataLoader's batches; a bad record stops the command
// with "file:line: reason", exit code 1 and no output file (or is skipped and reported on request);
// bad options get a clear message; --help lists the options.
#include <gtest/gtest.h>

#include <cstring>

#include "data/config.h"
#include "data/loader.h"
#include "tests/data/cli_util.h"

namespace sprig::data {
namespace {

using nlohmann::json;
using testing::CliRun;
using testing::DataCli;
using testing::Ids;
using Paths = std::vector<Ids>;

std::string rollout(const Ids& prompt, const std::vector<Ids>& completions) {
  return json({{"prompt_ids", prompt}, {"completions", completions}}).dump() + "\n";
}

TEST_F(DataCli, FoldReproducesE1AndE2) {
  const std::string input =
      write("rollouts.jsonl", rollout({11, 12, 13}, {{21, 22}, {31, 32, 33}}) +
                                  rollout({1, 2}, {{10, 11}, {20, 21, 22}}) +
                                  rollout({5}, {{7, 8}}) + rollout({}, {{10, 11}, {20}}));
  const CliRun r = sprig_data("fold --input " + input + " --out " + path("out.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "wrote " + path("out.jsonl") + ": 4 folded rollout groups\n");
  const std::vector<json> groups = read_jsonl("out.jsonl");
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0], json({{"input_ids", {11, 12, 13, 21, 22, 31, 32, 33}},
                             {"labels", {-100, -100, -100, 22, -100, 32, 33, -100}},
                             {"position_ids", {0, 1, 2, 3, 4, 3, 4, 5}},
                             {"node_lengths", {3, 2, 3}},
                             {"sample_paths", Paths{{0, 1}, {0, 2}}}}));
  EXPECT_EQ(groups[1], json({{"input_ids", {1, 2, 10, 11, 20, 21, 22}},
                             {"labels", {-100, -100, 11, -100, 21, 22, -100}},
                             {"position_ids", {0, 1, 2, 3, 2, 3, 4}},
                             {"node_lengths", {2, 2, 3}},
                             {"sample_paths", Paths{{0, 1}, {0, 2}}}}));
  EXPECT_EQ(groups[2], json({{"input_ids", {5, 7, 8}},
                             {"labels", {-100, 8, -100}},
                             {"position_ids", {0, 1, 2}},
                             {"node_lengths", {1, 2}},
                             {"sample_paths", Paths{{0, 1}}}}));
  // Empty prompt: node 0 is kept with length 0 but left out of every path.
  EXPECT_EQ(groups[3], json({{"input_ids", {10, 11, 20}},
                             {"labels", {11, -100, -100}},
                             {"position_ids", {0, 1, 0}},
                             {"node_lengths", {0, 2, 1}},
                             {"sample_paths", Paths{{1}, {2}}}}));
}

TEST_F(DataCli, FoldSpreadsAdvantagesAndOldLogProbsOverTheTokens) {
  json record = {{"prompt_ids", {1, 2}},
                 {"completions", {{10, 11}, {20}}},
                 {"advantages", {0.5, -1.0}},
                 {"old_logprobs", {{-0.25, -1.5}, {-2.0}}}};
  const std::string input = write("rl.jsonl", record.dump() + "\n");
  const CliRun r = sprig_data("fold --input " + input + " --out " + path("out.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> groups = read_jsonl("out.jsonl");
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]["advantages"], json({0.0, 0.0, 0.5, 0.5, -1.0}));
  EXPECT_EQ(groups[0]["old_logprobs"], json({0.0, 0.0, -0.25, -1.5, -2.0}));
}

// Rows of a (B, N) tensor, as the dump writes them.
json rows_json(const Tensor& t) {
  json rows = json::array();
  for (int64_t r = 0; r < t.size(0); ++r)
    rows.push_back(t.select(0, r).contiguous().to_vector<int64_t>());
  return rows;
}

// What `sprig data dump` should write for batch `index` of epoch 0.
json expected_dump(const Batch& b, int64_t index) {
  json j = {{"epoch", 0},
            {"batch", index},
            {"input_ids", rows_json(b.input_ids)},
            {"position_ids", rows_json(b.position_ids)},
            {"seq_lens", rows_json(b.seq_lens)},
            {"num_pad", b.num_pad}};
  const std::pair<const char*, const Tensor*> optional[] = {{"labels", &b.labels},
                                                            {"loss_mask", &b.loss_mask},
                                                            {"attention_mask", &b.attention_mask},
                                                            {"doc_remaining", &b.doc_remaining}};
  for (const auto& [name, tensor] : optional)
    if (tensor->defined()) j[name] = rows_json(*tensor);
  for (const TreeGroup& g : b.groups)
    j["prefix_trees"].push_back({{"row", g.row},
                                 {"offset", g.offset},
                                 {"node_lengths", g.node_lengths},
                                 {"sample_paths", g.sample_paths}});
  return j;
}

TEST_F(DataCli, DumpWritesTheDataLoadersBatches) {
  std::string documents, rollouts;
  for (int64_t d = 0; d < 30; ++d) {
    Ids ids, mask;
    for (int64_t i = 0; i <= d % 5; ++i) {
      ids.push_back(10 * d + i + 1);
      mask.push_back((d + i) % 2);
    }
    documents += json({{"input_ids", ids}, {"loss_mask", mask}}).dump() + "\n";
    rollouts += rollout(Ids(ids.begin(), ids.end() - 1), {{ids.back(), 1}, {2}});
  }
  const std::string docs_path = write("docs.jsonl", documents);
  const std::string rollouts_path = write("rollouts.jsonl", rollouts);
  const std::string data_sections[] = {
      "  train: " + docs_path + "\n  packing: sft\n  seq_len: 8\n",
      "  train: " + docs_path + "\n  packing: dflash\n  seq_len: 8\n  pad_id: 5\n",
      "  train: " + rollouts_path + "\n  format: rollouts\n  seq_len: 12\n"};
  for (const std::string& data : data_sections) {
    SCOPED_TRACE(data);
    const std::string config =
        write("config.yaml", "seed: 3\ndata:\n  micro_batch_size: 2\n" + data);
    const CliRun r =
        sprig_data("dump -c " + config + " --batches 2 --overwrite --out " + path("batches.jsonl"));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind("wrote " + path("batches.jsonl") + ": 2 batches; ", 0), 0u) << r.out;
    const std::vector<json> dumped = read_jsonl("batches.jsonl");
    ASSERT_EQ(dumped.size(), 2u);
    DataLoader loader(load_data_config(config));
    for (int64_t i = 0; i < 2; ++i) {
      const Batch b = loader.next();
      EXPECT_EQ(b.rows(), 2);
      EXPECT_EQ(dumped[i], expected_dump(b, i)) << "batch " << i;
    }
  }
}

// A bad file given to a subcommand, the line at fault and the reason printed for it.
struct BadFile {
  std::string args;  // subcommand and options but --input and --out
  std::vector<std::string> lines;
  int line;
  std::string reason;  // the start of it
  bool newline_at_end = true;

  std::string text() const {
    std::string t;
    for (const std::string& l : lines) t += l + "\n";
    if (!newline_at_end) t.pop_back();
    return t;
  }
};

const BadFile kBadFiles[] = {
    {"pack --mode sft --seq-len 8",
     {R"({"input_ids": [1], "labels": [1]})", R"({"input_ids": [1, 2,})"},
     2,
     "malformed JSON at column 21: unexpected '}'"},
    {"pack --mode dflash --seq-len 8",
     {R"({"input_ids": [1]})", "", R"({"loss_mask": [1]})"},
     3,
     R"(missing "input_ids")"},
    {"pack --mode dflash --seq-len 8",
     {R"({"input_ids": [1, 2], "loss_mask": [1]})"},
     1,
     R"("loss_mask" has 1 entries but "input_ids" has 2)"},
    {"pack --mode bfd --seq-len 8",
     {R"({"input_ids": [1, 2], "labels": [1, 2, 3]})"},
     1,
     R"("labels" has 3 entries but "input_ids" has 2)"},
    {"pack --mode sft --seq-len 8 --vocab-size 50",
     {R"({"input_ids": [1, 2]})", R"({"input_ids": [1, 50]})"},
     2,
     R"("input_ids"[1] = 50 is not a token id in [0, 50))"},
    {"pack --mode dflash --seq-len 8",
     {R"({"input_ids": [1]})", R"({"input_ids": [1, -3]})"},
     2,
     R"("input_ids"[1] = -3 is not a token id (negative))"},
    {"pack --mode dflash --seq-len 8",
     {R"({"input_ids": [1]})", R"({"input_ids": [1, 2)"},
     2,
     "truncated last line",
     false},
    {"pack --mode dflash --seq-len 8",
     {R"({"input_ids": [1], "labels": [1]})"},
     1,
     "dflash packing needs unshifted documents"},
    {"fold",
     {R"({"prompt_ids": [1], "completions": [[2]]})",
      R"({"prompt_ids": [1], "completions": [[2], []]})"},
     2,
     "[fold] completion 1 is empty"},
    {"fold",
     {R"({"prompt_ids": [], "completions": []})"},
     1,
     "[fold] a rollout group needs at least one completion"},
    {"fold", {R"({"prompt_ids": [1]})"}, 1, R"(missing "completions")"},
    {"fold --vocab-size 8",
     {R"({"prompt_ids": [1], "completions": [[2, 9]]})"},
     1,
     R"("completions"[0][1] = 9 is not a token id in [0, 8))"},
    {"fold",
     {R"({"prompt_ids": [1], "completions": [[2]]})",
      R"({"prompt_ids": [1], "completions": [[2]])"},
     2,
     "truncated last line",
     false},
};

TEST_F(DataCli, BadRecordsStopWithFileLineAndReason) {
  for (const BadFile& bad : kBadFiles) {
    const std::string input = write("bad.jsonl", bad.text());
    SCOPED_TRACE(bad.args + " on " + bad.text());
    const CliRun r = sprig_data(bad.args + " --input " + input + " --out " + path("out.jsonl"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(input + ":" + std::to_string(bad.line) + ": " + bad.reason),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(std::filesystem::exists(path("out.jsonl")));
  }
}

TEST_F(DataCli, DumpStopsAtABadRecordOfTheConfigsData) {
  const std::string docs =
      write("docs.jsonl", "{\"input_ids\": [1, 2]}\n{\"input_ids\": [3, 64]}\n");
  const std::string config =
      write("config.yaml",
            "data:\n  train: " + docs + "\n  packing: dflash\n  seq_len: 4\n  vocab_size: 64\n");
  const CliRun r = sprig_data("dump -c " + config + " --out " + path("out.jsonl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(docs + ":2: \"input_ids\"[1] = 64 is not a token id in [0, 64)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(path("out.jsonl")));
}

TEST_F(DataCli, SkippedBadRecordsAreCountedAndReported) {
  const std::string input = write(
      "docs.jsonl", "{\"input_ids\": [1, 2]}\n{\"input_ids\": 3}\n{\"input_ids\": [4]}\n{}\n");
  std::string summary;
  const std::vector<json> rows = pack(input, "dflash", 4, "--skip-bad-records", summary);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["input_ids"], json({1, 2, 4, 0}));
  EXPECT_NE(summary.find("skipped 2 bad records (" + input +
                         ":2: \"input_ids\" must be an array of integers; " + input +
                         ":4: missing \"input_ids\")"),
            std::string::npos)
      << summary;
}

TEST_F(DataCli, BadOptionsGetAClearMessage) {
  const std::string input = write("docs.jsonl", "{\"input_ids\": [1, 2]}\n");
  const std::string out = " --out " + path("out.jsonl");
  const std::pair<std::string, std::string> cases[] = {
      {"pack --input " + input + " --seq-len 4 --mode knapsack" + out,
       "--mode: knapsack not in {dflash,padded,sft,bfd}"},
      {"pack --seq-len 4 --mode sft" + out, "--input is required"},
      {"fold" + out, "--input is required"},
      {"pack --input " + path("absent.jsonl") + " --seq-len 4 --mode sft" + out,
       "--input: File does not exist: " + path("absent.jsonl")},
      {"pack --input " + input + " --seq-len 0 --mode sft" + out,
       "--seq-len: must be a positive number, got 0"},
      {"pack --input " + input + " --seq-len 4 --mode sft --pad-id -1" + out,
       "--pad-id: Value -1 not in range 0 to 2147483647"},
      {"pack --input " + input + " --seq-len 4 --mode sft --vocab-size 8 --pad-id 8" + out,
       "[data] --pad-id 8 is not a token id in [0, 8)"},
      {"dump --batches 1" + out, "--config is required"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    const CliRun r = sprig_data(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_FALSE(std::filesystem::exists(path("out.jsonl")));
  }
}

// An option the chosen mode ignores is a usage error naming the mode it applies to, and writes
// nothing; in that mode it does its work.
TEST_F(DataCli, PackRefusesOptionsItsModeIgnores) {
  const std::string docs = write("docs.jsonl", "{\"input_ids\": [1, 2, 3, 4, 5, 6]}\n");
  const std::string out = " --out " + path("out.jsonl");
  const std::pair<std::string, std::string> cases[] = {
      {"--mode sft --eot-id 0", "--eot-id applies to --format shards, not --format documents"},
      {"--mode dflash --drop-long-samples false",
       "--drop-long-samples applies to --mode sft and bfd, not --mode dflash, which truncates "
       "documents longer than --seq-len"},
      {"--mode padded --drop-long-samples true",
       "--drop-long-samples applies to --mode sft and bfd, not --mode padded, which truncates "
       "documents longer than --seq-len"},
  };
  for (const auto& [args, message] : cases) {
    SCOPED_TRACE(args);
    const CliRun r = sprig_data("pack --input " + docs + " --seq-len 4 " + args + out);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.err, "sprig: [data pack] " + message + " (see sprig data pack --help)\n");
    EXPECT_FALSE(std::filesystem::exists(path("out.jsonl")));
  }
  // sft drops a document longer than S by default, and refuses it under --drop-long-samples false.
  const CliRun refused = sprig_data("pack --input " + docs + " --seq-len 4 --mode sft " +
                                    "--drop-long-samples false" + out);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("has 5 tokens, more than seq_len 4"), std::string::npos)
      << refused.err;
  // Shards: end-of-text id 0 splits 1 2 0 3 0 into two documents, one row each under padded.
  std::string shard(256 * 4 + 5 * 4, '\0');
  const int32_t header[] = {20240520, 2, 5};
  const uint32_t tokens[] = {1, 2, 0, 3, 0};
  std::memcpy(shard.data(), header, sizeof header);
  std::memcpy(shard.data() + 256 * 4, tokens, sizeof tokens);
  std::string summary;
  const std::vector<json> rows =
      pack(write("tokens.bin", shard), "padded", 3, "--format shards --eot-id 0", summary);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["input_ids"], json({1, 2, 0}));
  EXPECT_EQ(rows[1]["input_ids"], json({3, 0, 0}));
}

TEST_F(DataCli, HelpListsEachSubcommandsOptions) {
  const std::pair<const char*, std::vector<const char*>> subcommands[] = {
      {"pack",
       {"--input", "--seq-len", "--mode", "{dflash,padded,sft,bfd}", "--pad-id", "--out",
        "--vocab-size", "--max-packs", "--drop-long-samples", "--skip-bad-records",
        "padding fraction"}},
      {"fold", {"--input", "--out", "--vocab-size", "--skip-bad-records", "prompt_ids"}},
      {"dump", {"--config", "--batches", "--out", "--split", "--rank", "--world"}},
  };
  for (const auto& [name, options] : subcommands) {
    SCOPED_TRACE(name);
    const CliRun r = sprig_data(std::string(name) + " --help");
    EXPECT_EQ(r.exit_code, 0);
    for (const char* option : options) EXPECT_NE(r.out.find(option), std::string::npos) << option;
  }
}

}  // namespace
}  // namespace sprig::data
