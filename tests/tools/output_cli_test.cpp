// Every command that writes keeps what a user has: an existing output is refused (exit 1, the
// target untouched) unless --overwrite names an earlier output of the same kind, outputs are
// checked before any work, and a failed command leaves no file behind. Also the generate caps and
// the option messages of positive-only options.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "nn/qwen_config.h"
#include "tensor/safetensors.h"
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

// An --out in a place that cannot be written (/proc, even for root) is one sentence naming the
// path and the reason, before any work, never a raw filesystem error.
TEST_F(OutputCli, AnUnwritableOutIsOneSentenceBeforeAnyWork) {
  write_text(dir + "/r.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  for (const std::string& command : {"convert --from-hf " + kModel + " --out /proc/sprig_out",
                                     "score --device cpu --model " + kModel + " --input " + dir +
                                         "/r.jsonl --out " + "/proc/sprig_out.safetensors"}) {
    const CliRun r = sprig(command);
    EXPECT_EQ(r.exit_code, 1) << command << ": " << r.err;
    EXPECT_TRUE(r.err.starts_with("sprig: [--out] /proc/sprig_out")) << r.err;
    EXPECT_NE(r.err.find(": cannot "), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.err.find("filesystem error"), std::string::npos) << r.err;
    EXPECT_EQ(r.out, "") << command;
  }
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
      {"{\"prompt_ids\": [1], \"completions\": []}",
       ":1: \"completions\" must be a non-empty list of id lists"},
      {"{\"input_ids\": [1e99999]}", ":1: the number 1e99999 is out of range"},
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
  write_text(dir + "/notes.txt", "mine");
  expect_refused(sprig(mask + " --png " + dir + "/notes.txt --overwrite"),
                 "[--png] " + dir +
                     "/notes.txt is not a PNG that sprig wrote: refusing to replace it, even with "
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

TEST_F(OutputCli, AnOutputNeverReplacesOrEntersAnInput) {
  // A model of the user's, and inputs reached through links.
  ASSERT_EQ(sprig("convert --from-hf " + kModel + " --out " + dir + "/M").exit_code, 0);
  const std::string weights = read_text(dir + "/M/model.safetensors");
  write_text(dir + "/r.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  write_text(dir + "/docs.jsonl", "{\"input_ids\": [1, 2, 3], \"loss_mask\": [1, 1, 1]}\n");
  write_text(dir + "/text.jsonl", "{\"text\": \"hello\"}\n");
  write_text(dir + "/spec.json", "{\"kind\": \"causal\", \"length\": 4}");
  fs::create_hard_link(dir + "/docs.jsonl", dir + "/hard.jsonl");
  fs::create_symlink(dir + "/docs.jsonl", dir + "/soft.jsonl");
  const std::string never =
      ": an output never replaces or enters one of the command's inputs, even with --overwrite; "
      "choose another path";
  const std::string model = " --device cpu --model " + dir + "/M --input " + dir + "/r.jsonl";
  for (const std::string overwrite : {"", " --overwrite"}) {
    expect_refused(
        sprig("score" + model + " --out " + dir + "/M/model.safetensors" + overwrite),
        "[--out] " + dir + "/M/model.safetensors lies inside --model " + dir + "/M" + never);
    expect_refused(
        sprig("eval dflash --device cpu --target " + dir + "/M --draft " + dir + "/M --input " +
              dir + "/r.jsonl --out " + dir + "/M/model.safetensors" + overwrite),
        "[--out] " + dir + "/M/model.safetensors lies inside --target " + dir + "/M" + never);
    expect_refused(sprig("convert --from-hf " + dir + "/M --out " + dir + "/M" + overwrite),
                   "[--out] " + dir + "/M is also --from-hf" + never);
    expect_refused(sprig("convert --from-hf " + dir + "/M --out " + dir + overwrite),
                   "[--out] " + dir + " holds --from-hf " + dir + "/M" + never);
    expect_refused(sprig("data tokenize --tokenizer " + testing::kGoldenDir + "tokenizer --input " +
                         dir + "/text.jsonl --out " + dir + "/text.jsonl" + overwrite),
                   "[--out] " + dir + "/text.jsonl is also --input" + never);
    expect_refused(sprig("data pack --mode sft --seq-len 4 --input " + dir + "/docs.jsonl --out " +
                         dir + "/hard.jsonl" + overwrite),
                   "[--out] " + dir + "/hard.jsonl is the same file as --input " + dir +
                       "/docs.jsonl" + never);
    expect_refused(
        sprig("data fold --input " + dir + "/soft.jsonl --out " + dir + "/docs.jsonl" + overwrite),
        "[--out] " + dir + "/docs.jsonl is the same file as --input " + dir + "/soft.jsonl" +
            never);
    expect_refused(
        sprig("mask --spec " + dir + "/spec.json --out " + dir + "/spec.json" + overwrite),
        "[--out] " + dir + "/spec.json is also --spec" + never);
  }
  EXPECT_EQ(read_text(dir + "/M/model.safetensors"), weights);
  EXPECT_EQ(read_text(dir + "/text.jsonl"), "{\"text\": \"hello\"}\n");
  EXPECT_EQ(read_text(dir + "/docs.jsonl"),
            "{\"input_ids\": [1, 2, 3], \"loss_mask\": [1, 1, 1]}\n");
  // A data file a dump's config names is one of its inputs.
  write_text(dir + "/c.yaml",
             "data:\n  train: " + dir + "/docs.jsonl\n  seq_len: 4\n  packing: sft\n");
  expect_refused(sprig("data dump -c " + dir + "/c.yaml --out " + dir + "/docs.jsonl --overwrite"),
                 "[--out] " + dir + "/docs.jsonl is also the config's data file" + never);
}

TEST_F(OutputCli, OverwriteReplacesOnlyWhatTheSameCommandWrote) {
  write_text(dir + "/r.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  write_text(dir + "/spec.json", "{\"kind\": \"causal\", \"length\": 4}");
  const std::string score =
      "score --device cpu --model " + kModel + " --input " + dir + "/r.jsonl --overwrite --out ";
  const std::string refusing = ": refusing to replace it, even with --overwrite";
  // A safetensors file written by another program (no "sprig.output" in its metadata).
  save_safetensors(dir + "/py.safetensors", {{"x", Tensor::zeros({2}, DType::f32)}});
  const std::string python = read_text(dir + "/py.safetensors");
  expect_refused(sprig(score + dir + "/py.safetensors"),
                 "[--out] " + dir +
                     "/py.safetensors is a safetensors file that sprig did not write (its "
                     "metadata has no \"sprig.output\")" +
                     refusing);
  EXPECT_EQ(read_text(dir + "/py.safetensors"), python);
  // sprig's, but another command's: a mask is not replaced by logits, nor logits by a mask.
  ASSERT_EQ(sprig("mask --spec " + dir + "/spec.json --out " + dir + "/m.safetensors").exit_code,
            0);
  expect_refused(sprig(score + dir + "/m.safetensors"),
                 "[--out] " + dir +
                     "/m.safetensors is the output of sprig mask, not of sprig score (its "
                     "metadata's \"sprig.output\")" +
                     refusing);
  ASSERT_EQ(sprig(score + dir + "/l.safetensors").exit_code, 0);
  expect_refused(
      sprig("mask --spec " + dir + "/spec.json --overwrite --out " + dir + "/l.safetensors"),
      "[--out] " + dir +
          "/l.safetensors is the output of sprig score, not of sprig mask (its metadata's "
          "\"sprig.output\")" +
          refusing);
  EXPECT_EQ(sprig(score + dir + "/l.safetensors").exit_code, 0);
  // A model directory sprig did not write (the golden fixture, written by Python).
  fs::create_directories(dir + "/hf");
  fs::copy(kModel, dir + "/hf", fs::copy_options::recursive);
  expect_refused(sprig("convert --overwrite --from-hf " + kModel + " --out " + dir + "/hf"),
                 "[--out] " + dir +
                     "/hf is a checkpoint directory that sprig did not write (its metadata has no "
                     "\"sprig.output\")" +
                     refusing);
  EXPECT_EQ(read_text(dir + "/hf/model.safetensors"), read_text(kModel + "/model.safetensors"));
}

TEST_F(OutputCli, TwoOutputsNamingOnePathAreRefusedBeforeAnyWork) {
  write_text(dir + "/spec.json", "{\"kind\": \"causal\", \"length\": 4}");
  for (const std::string& png : {dir + "/p", dir + "/./p"})
    expect_refused(sprig("mask --spec " + dir + "/spec.json --out " + dir + "/p --png " + png),
                   "[--png] " + png + " is also --out: give each output a path of its own");
  EXPECT_EQ(entries_of(dir), (std::set<std::string>{"spec.json", "stderr.txt", "stdout.txt"}));
}

TEST_F(OutputCli, NonRegularFilesAreRefusedWhereAFileIsRead) {
  // A FIFO would block a reader forever; a directory cannot be mapped.
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0644), 0);
  fs::create_directories(dir + "/fm");
  fs::copy_file(kModel + "/config.json", dir + "/fm/config.json");
  ASSERT_EQ(::mkfifo((dir + "/fm/model.safetensors").c_str(), 0644), 0);
  fs::create_directories(dir + "/dm/model.safetensors");
  fs::copy_file(kModel + "/config.json", dir + "/dm/config.json");
  write_text(dir + "/r.jsonl", "{\"input_ids\": [1, 2, 3]}\n");
  const std::string score =
      "score --device cpu --input " + dir + "/r.jsonl --out " + dir + "/l.safetensors --model ";
  expect_refused(sprig(score + dir + "/fm"),
                 dir +
                     "/fm/model.safetensors is not a regular file (a FIFO): give a safetensors "
                     "file");
  expect_refused(sprig(score + dir + "/dm"),
                 dir + "/dm/model.safetensors is a directory: give a safetensors file");
  expect_refused(sprig("score --device cpu --model " + kModel + " --input " + dir + "/fifo --out " +
                       dir + "/l.safetensors"),
                 dir + "/fifo is not a regular file (a FIFO): give a JSONL file");
  expect_refused(sprig("data fold --input " + dir + "/fifo --out " + dir + "/f.jsonl"),
                 "[data] " + dir +
                     "/fifo is not a regular file (a FIFO): give a data file (JSONL "
                     "or token shard)");
  expect_refused(sprig("mask --spec " + dir + "/fifo --out " + dir + "/m.safetensors"),
                 dir + "/fifo is not a regular file (a FIFO): give a mask spec file (JSON)");
  EXPECT_FALSE(fs::exists(dir + "/l.safetensors"));
}

TEST_F(OutputCli, GenerateIsCappedAndChecksItsOptions) {
  const QwenConfig config = QwenConfig::load(kModel + "/config.json");
  const std::string generate = "generate --device cpu --model " + kModel + " --prompt-ids 1,2,3";
  // Past max_position_embeddings it would only warn; the KV cache of that many tokens is refused.
  const CliRun huge = sprig(generate + " --max-new-tokens 1000000000000");
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_NE(huge.err.find("sprig: [generate] decoding 1000000000003 tokens holds a KV cache of "
                          "about "),
            std::string::npos)
      << huge.err;
  EXPECT_NE(huge.err.find(": lower --max-new-tokens"), std::string::npos) << huge.err;
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
  EXPECT_EQ(dump.err, "sprig: [data dump] --config: File is actually a directory: " + dir +
                          " (see sprig data dump --help)\n");
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
                     "/run/metrics.jsonl is also the run's metrics: an output never replaces or "
                     "enters one of the command's inputs, even with --overwrite; choose another "
                     "path");
  write_text(dir + "/notes.txt", "mine");
  expect_refused(sprig("plot " + dir + "/run --out " + dir + "/notes.txt --overwrite"),
                 "[--out] " + dir +
                     "/notes.txt is not a PNG that sprig wrote: refusing to replace it, even with "
                     "--overwrite");
  EXPECT_EQ(entries_of(dir + "/run"), (std::set<std::string>{"curves.png", "metrics.jsonl"}));
  expect_refused(sprig("plot " + dir + "/nothing"),
                 dir + "/nothing is not a run directory: it has no metrics.jsonl");
}

}  // namespace
}  // namespace sprig
