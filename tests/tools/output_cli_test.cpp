// Every command that writes keeps what a user has: an existing output is refused (exit 1, the
// target untouched) unless --overwrite names an earlier output of the same kind, outputs are
// checked before any work, and a failed command leaves no file behind. Also the generate caps and
// the option messages of positive-only options.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "nn/qwen_config.h"
#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"

namespace sprig {
namespace {

using testing::CliRun;
using testing::entries_of;
using testing::read_text;
using testing::run_sprig;
using testing::write_text;
namespace fs = std::filesystem;

const std::string kModel = testing::kGoldenDir + "qwen3_tiny";

class OutputCli : public ::testing::Test {
 protected:
  OutputCli()
      : tmp_("output_cli_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())) {}
  CliRun sprig(const std::string& args) const { return run_sprig(args, dir); }
  // A refused run: exit 1, one line on stderr, nothing on stdout.
  static void expect_refused(const CliRun& r, const std::string& message) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_EQ(r.err, "sprig: " + message + "\n");
    EXPECT_EQ(r.out, "");
  }

  testing::NamedTempDir tmp_;
  const std::string& dir = tmp_.path;
};

TEST_F(OutputCli, ConvertNeverDeletesWhatIsAtOut) {
  // A user's project (with a .git) is refused and left exactly as it was, even with --overwrite.
  fs::create_directories(dir + "/p/src");
  fs::create_directories(dir + "/p/.git");
  write_text(dir + "/p/src/main.py", "x");
  const std::string convert = "convert --from-hf " + kModel + " --out " + dir + "/p";
  expect_refused(sprig(convert), "[--out] " + dir +
                                     "/p already exists and is not empty: choose a new "
                                     "directory, or give --overwrite to replace it");
  expect_refused(sprig(convert + " --overwrite"),
                 "[--out] " + dir +
                     "/p is not a checkpoint directory that sprig wrote: refusing to replace it, "
                     "even with --overwrite");
  EXPECT_EQ(read_text(dir + "/p/src/main.py"), "x");
  EXPECT_EQ(entries_of(dir + "/p"), (std::set<std::string>{".git", "src"}));
  // A file is not replaced by a directory.
  write_text(dir + "/file", "keep");
  expect_refused(sprig("convert --from-hf " + kModel + " --out " + dir + "/file"),
                 "[--out] " + dir + "/file is a file, not a directory: choose a directory");
  EXPECT_EQ(read_text(dir + "/file"), "keep");
  // An earlier conversion is replaced on request only.
  const std::string fresh = "convert --from-hf " + kModel + " --out " + dir + "/m";
  ASSERT_EQ(sprig(fresh).exit_code, 0);
  EXPECT_EQ(sprig(fresh).exit_code, 1);
  const CliRun again = sprig(fresh + " --overwrite");
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(entries_of(dir + "/m"), (std::set<std::string>{"config.json", "model.safetensors"}));
  EXPECT_EQ(entries_of(dir), (std::set<std::string>{"file", "m", "p", "stderr.txt", "stdout.txt"}));
}

TEST_F(OutputCli, ScoreChecksItsOutputBeforeScoring) {
  write_text(dir + "/r.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  const std::string score =
      "score --device cpu --model " + kModel + " --input " + dir + "/r.jsonl --out ";
  expect_refused(sprig(score + dir + "/missing/l.safetensors"),
                 "[--out] " + dir + "/missing/l.safetensors: the directory " + dir +
                     "/missing does not exist");
  write_text(dir + "/notes.safetensors", "mine");
  expect_refused(sprig(score + dir + "/notes.safetensors --overwrite"),
                 "[--out] " + dir +
                     "/notes.safetensors is not a safetensors file that sprig wrote: refusing "
                     "to replace it, even with --overwrite");
  EXPECT_EQ(read_text(dir + "/notes.safetensors"), "mine");
  ASSERT_EQ(sprig(score + dir + "/l.safetensors").exit_code, 0);
  EXPECT_EQ(sprig(score + dir + "/l.safetensors").exit_code, 1);
  EXPECT_EQ(sprig(score + dir + "/l.safetensors --overwrite").exit_code, 0);
  // Records a scorer cannot read unambiguously, and a directory as input.
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{\"input_ids\": [1, 2], \"documents\": [[1]]}",
       ":1: a record holds one layout: \"input_ids\", \"documents\", or \"prompt_ids\" with "
       "\"completions\", not several"},
      {"{\"prompt_ids\": [], \"completions\": [[1, 2]]}",
       ":1: \"prompt_ids\" must be a non-empty list of token ids"},
      {"{\"input_ids\": [1e99999]}",
       ":1: malformed JSON ([json.exception.out_of_range.406] "
       "number overflow parsing '1e99999')"},
  };
  for (const auto& [record, message] : bad) {
    write_text(dir + "/bad.jsonl", record + "\n");
    expect_refused(sprig("score --device cpu --model " + kModel + " --input " + dir +
                         "/bad.jsonl --out " + dir + "/b.safetensors"),
                   dir + "/bad.jsonl" + message);
  }
  expect_refused(sprig("score --device cpu --model " + kModel + " --input " + dir + " --out " +
                       dir + "/b.safetensors"),
                 dir + " is a directory: give a JSONL file");
  EXPECT_FALSE(fs::exists(dir + "/b.safetensors"));
}

TEST_F(OutputCli, MaskWritesBothFilesOrNeither) {
  write_text(dir + "/spec.json", "{\"kind\": \"causal\", \"length\": 8}");
  const std::string mask = "mask --spec " + dir + "/spec.json --out " + dir + "/m.safetensors";
  // A PNG that cannot be written is found before the safetensors file is.
  expect_refused(sprig(mask + " --png " + dir + "/no/m.png"),
                 "[--png] " + dir + "/no/m.png: the directory " + dir + "/no does not exist");
  EXPECT_FALSE(fs::exists(dir + "/m.safetensors"));
  ASSERT_EQ(sprig(mask + " --png " + dir + "/m.png").exit_code, 0);
  expect_refused(sprig(mask + " --png " + dir + "/m.png"),
                 "[--out] " + dir +
                     "/m.safetensors already exists: choose another name, or give --overwrite "
                     "to replace it");
  EXPECT_EQ(sprig(mask + " --png " + dir + "/m.png --overwrite").exit_code, 0);
  // A file that is not a PNG is never replaced by one.
  expect_refused(sprig(mask + " --png " + dir + "/spec.json --overwrite"),
                 "[--png] " + dir +
                     "/spec.json is not a PNG that sprig wrote: refusing to replace it, even with "
                     "--overwrite");
  const CliRun tile = sprig(mask + " --overwrite --tile 0");
  EXPECT_EQ(tile.exit_code, 2);
  EXPECT_NE(tile.err.find("--tile: must be a positive number, got 0"), std::string::npos)
      << tile.err;
  // A prefix tree whose path lets a node see a later one.
  write_text(dir + "/tree.json",
             "{\"kind\": \"prefix_tree\", \"node_lengths\": [2, 1, 1], \"sample_paths\": "
             "[[0, 2, 1]]}");
  expect_refused(sprig("mask --spec " + dir + "/tree.json --out " + dir + "/t.safetensors"),
                 dir +
                     "/tree.json: [prefix_tree_mask] sample_paths[0][2] = 1 does not come after "
                     "its parent 2: node indices increase along a path");
  EXPECT_FALSE(fs::exists(dir + "/t.safetensors"));
  // A mask whose dense dump cannot fit in memory is refused before it is built.
  write_text(dir + "/huge.json", "{\"kind\": \"causal\", \"length\": 1000000000000}");
  const CliRun huge = sprig("mask --spec " + dir + "/huge.json --out " + dir + "/h.safetensors");
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_EQ(huge.err.rfind("sprig: [mask] the dense [1000000000000, 1000000000000] mask needs ", 0),
            0u)
      << huge.err;
  EXPECT_FALSE(fs::exists(dir + "/h.safetensors"));
}

TEST_F(OutputCli, DataCommandsLeaveNoPartialFile) {
  write_text(dir + "/docs.jsonl",
             "{\"input_ids\": [1, 2, 3], \"loss_mask\": [1, 1, 1]}\n{\"input_ids\": [1, 2\n");
  const std::string pack = "data pack --input " + dir + "/docs.jsonl --mode sft --seq-len 4 --out ";
  const CliRun bad = sprig(pack + dir + "/rows.jsonl");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_FALSE(fs::exists(dir + "/rows.jsonl"));
  write_text(dir + "/docs.jsonl", "{\"input_ids\": [1, 2, 3], \"loss_mask\": [1, 1, 1]}\n");
  write_text(dir + "/mine.jsonl", "not json\n");
  expect_refused(sprig(pack + dir + "/mine.jsonl --overwrite"),
                 "[--out] " + dir +
                     "/mine.jsonl is not a JSON Lines file that sprig wrote: refusing to replace "
                     "it, even with --overwrite");
  EXPECT_EQ(read_text(dir + "/mine.jsonl"), "not json\n");
  ASSERT_EQ(sprig(pack + dir + "/rows.jsonl").exit_code, 0);
  EXPECT_EQ(sprig(pack + dir + "/rows.jsonl").exit_code, 1);
  EXPECT_EQ(sprig(pack + dir + "/rows.jsonl --overwrite").exit_code, 0);
  // A row that cannot fit in memory is refused before anything is read.
  const CliRun huge =
      sprig("data pack --input " + dir + "/docs.jsonl --mode sft --seq-len 1000000000000 --out " +
            dir + "/huge.jsonl");
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_EQ(huge.err.rfind("sprig: [data] --seq-len 1000000000000 needs about 45776367 MiB per "
                           "row, over a quarter of the ",
                           0),
            0u)
      << huge.err;
  EXPECT_FALSE(fs::exists(dir + "/huge.jsonl"));
  // Options that must be positive or non-negative say so.
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {pack + dir + "/x.jsonl --max-packs -1",
            "--max-packs: must be zero or positive, got -1"},
           {pack + dir + "/x.jsonl --vocab-size -5",
            "--vocab-size: must be zero or positive, got -5"},
       }) {
    const CliRun r = sprig(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  write_text(dir + "/c.yaml", "data:\n  train: " + dir + "/docs.jsonl\n  seq_len: 4\n");
  const std::string dump = "data dump -c " + dir + "/c.yaml --out " + dir + "/d.jsonl";
  const CliRun world0 = sprig(dump + " --world 0");
  EXPECT_EQ(world0.exit_code, 2);
  EXPECT_NE(world0.err.find("--world: must be a positive number, got 0"), std::string::npos)
      << world0.err;
  const CliRun rank = sprig(dump + " --world 2 --rank 2");
  EXPECT_EQ(rank.exit_code, 2);
  EXPECT_NE(rank.err.find("rank 2 is not in [0, 2) for --world 2"), std::string::npos) << rank.err;
  write_text(dir + "/c.yaml",
             "data:\n  train: " + dir + "/docs.jsonl\n  seq_len: 4\n  packing: sft\n");
  expect_refused(sprig(dump + " --world 2 --rank 1"),
                 "[data] 1 packed rows cannot be shared by 2 ranks: each needs a row of its own "
                 "(more data or fewer ranks)");
  EXPECT_FALSE(fs::exists(dir + "/d.jsonl"));
}

TEST_F(OutputCli, GenerateIsCappedAndChecksItsOptions) {
  const QwenConfig config = QwenConfig::load(kModel + "/config.json");
  const std::string generate = "generate --device cpu --model " + kModel + " --prompt-ids 1,2,3";
  const int64_t room = config.max_position_embeddings - 3;
  expect_refused(sprig(generate + " --max-new-tokens 1000000000000"),
                 "[generate] max_new_tokens 1000000000000 must be in [1, " + std::to_string(room) +
                     "]: the model's max_position_embeddings " +
                     std::to_string(config.max_position_embeddings) + " less the 3-token prompt");
  expect_refused(sprig(generate + " --stop-id " + std::to_string(config.vocab_size)),
                 "[generate] stop id " + std::to_string(config.vocab_size) +
                     " is outside the vocabulary [0, " + std::to_string(config.vocab_size) + ")");
  const CliRun zero = sprig(generate + " --max-new-tokens 0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("--max-new-tokens: must be a positive number, got 0"), std::string::npos)
      << zero.err;
  EXPECT_EQ(zero.err.find("1797693"), std::string::npos) << zero.err;
  // The model directory given as its config.json is named as such.
  expect_refused(sprig("generate --device cpu --model " + kModel + "/config.json --prompt-ids 1"),
                 kModel +
                     "/config.json is a file, not a model directory: give the directory "
                     "that holds it");
}

TEST_F(OutputCli, ADirectoryGivenAsAFileIsNamed) {
  expect_refused(sprig("train sft -c " + dir),
                 "[config] " + dir + " is a directory: give a config file (YAML)");
  const CliRun dump = sprig("data dump -c " + dir + " --out " + dir + "/d.jsonl");
  EXPECT_EQ(dump.exit_code, 2);  // a usage error, caught by the option's check
  EXPECT_EQ(dump.err.rfind("--config: File is actually a directory: " + dir, 0), 0u) << dump.err;
  write_text(dir + "/m.json", "{\"kind\": \"causal\", \"length\": 4}");
  expect_refused(sprig("mask --spec " + dir + " --out " + dir + "/m.safetensors"),
                 dir + " is a directory: give a mask spec file (JSON)");
}

TEST_F(OutputCli, PlotRefusesToReplaceWhatItDidNotDraw) {
  fs::create_directories(dir + "/run");
  write_text(dir + "/run/metrics.jsonl",
             "{\"step\": 1, \"loss\": 2.0, \"lr\": 0.1}\n{\"step\": 2, \"loss\": 1.5, \"lr\": "
             "0.1}\n");
  ASSERT_EQ(sprig("plot " + dir + "/run").exit_code, 0);
  EXPECT_EQ(sprig("plot " + dir + "/run").exit_code, 1);
  EXPECT_EQ(sprig("plot " + dir + "/run --overwrite").exit_code, 0);
  expect_refused(sprig("plot " + dir + "/run --out " + dir + "/run/metrics.jsonl --overwrite"),
                 "[--out] " + dir +
                     "/run/metrics.jsonl is not a PNG that sprig wrote: refusing to replace it, "
                     "even with --overwrite");
  EXPECT_EQ(entries_of(dir + "/run"), (std::set<std::string>{"curves.png", "metrics.jsonl"}));
  expect_refused(sprig("plot " + dir + "/nothing"),
                 dir + "/nothing is not a run directory: it has no metrics.jsonl");
}

}  // namespace
}  // namespace sprig
