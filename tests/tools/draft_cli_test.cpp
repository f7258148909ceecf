// End-to-end tests of the draft commands of the `sprig` executable (SPRIG_BIN): `eval dflash`
// reproduces PyTorch's numbers on the golden pair (tests/golden: qwen3_tiny, dflash_tiny) and
// aggregates records as validation does; `train dflash`, `convert --to-hf` (the serving layout's
// checklist, tokenizer files, bit-exact round trips) and the export loaded back for eval and as a
// training init, and the same for Domino and JetSpec drafts; bad records and options stop with
// one sentence and write nothing. The reference's drafts and the per-engine exports are in
// reference_drafts_cli_test.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/nn/golden_check.h"
#include "tests/test_util.h"
#include "tests/tools/draft_cli_util.h"

namespace sprig {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::CliRun;
using testing::DraftCli;
using testing::json_lines;
using testing::kGoldenDir;
using testing::run_sprig;
using testing::tensor_bytes;

std::vector<int64_t> part(const Tensor& row, int64_t begin, int64_t end) {
  return row.slice(0, begin, end).contiguous().to_vector<int64_t>();
}

// The packed golden case as one record: the same loss, metrics, logits and gradients.
TEST_F(DraftCli, EvalReproducesThePyTorchNumbers) {
  const SafetensorsFile golden(kGoldenDir + "dflash_tiny_expected.safetensors");
  const Tensor ids = golden.load("packed.input_ids").select(0, 0);
  const Tensor mask = golden.load("packed.loss_mask").select(0, 0);
  const json record = {{"documents",
                        {{{"input_ids", part(ids, 0, 9)}, {"loss_mask", part(mask, 0, 9)}},
                         {{"input_ids", part(ids, 9, 16)}, {"loss_mask", part(mask, 9, 16)}}}},
                       {"anchors", golden.load("packed.anchors").to_vector<int64_t>()}};
  const CliRun r = eval(record.dump() + "\n", "--grads --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 2u);
  const SafetensorsFile got(out);
  auto scalar = [&](const std::string& name) { return golden.load("packed." + name).item(); };
  EXPECT_NEAR(lines[0]["loss"].get<double>(), scalar("loss"), 1e-5 * scalar("loss"));
  EXPECT_EQ(got.load("0.loss").item(), lines[0]["loss"].get<double>());
  for (const char* name : {"valid_tokens", "correct_tokens", "accept_len_sum", "valid_blocks"}) {
    EXPECT_EQ(lines[0][name].get<double>(), scalar(name)) << name;
    EXPECT_EQ(got.load(std::string("0.") + name).item(), scalar(name)) << name;
  }
  EXPECT_EQ(lines[1]["aggregate"]["loss"], lines[0]["loss"]);
  EXPECT_LE(testing::relative_error(got.load("0.logits"), golden.load("packed.logits")), 1e-5);
  EXPECT_EQ(got.load("0.anchors").to_vector<int64_t>(), (std::vector<int64_t>{2, 4, 9, 11}));
  int grads = 0;
  for (const StTensorInfo& t : golden.tensors()) {
    if (t.name.rfind("packed.grad.", 0) != 0) continue;
    const std::string param = t.name.substr(std::string("packed.grad.").size());
    EXPECT_LE(testing::relative_error(got.load("0.grad." + param), golden.load(t.name)), 1e-3)
        << param;
    ++grads;
  }
  EXPECT_EQ(grads, 25);
}

TEST_F(DraftCli, EvalAggregatesRecordsAsValidationDoes) {
  std::string records;
  for (int r = 0; r < 4; ++r) {
    std::vector<int64_t> ids;
    for (int t = 0; t < 12 + 3 * r; ++t) ids.push_back((7 * t + 11 * r) % 95);
    records += json{{"input_ids", ids}}.dump() + "\n";
  }
  records += json{{"input_ids", {1, 2}}, {"loss_mask", {0, 0}}}.dump() + "\n";  // no anchor
  const CliRun r = eval(records, "--num-anchors 3 --seed 5");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[4], (json{{"record", 4}, {"skipped", "no valid anchor"}}));
  double weighted = 0, weight = 0, correct = 0, valid = 0, accepted = 0, blocks = 0;
  for (int i = 0; i < 4; ++i) {
    const json& l = lines[static_cast<size_t>(i)];
    EXPECT_EQ(l["record"], i);
    EXPECT_EQ(l["valid_blocks"], 3.0);  // every record has more than 3 valid anchors
    weighted += l["loss"].get<double>() * l["loss_weight"].get<double>();
    weight += l["loss_weight"].get<double>();
    correct += l["correct_tokens"].get<double>();
    valid += l["valid_tokens"].get<double>();
    accepted += l["accept_len_sum"].get<double>();
    blocks += l["valid_blocks"].get<double>();
  }
  const json& a = lines[5]["aggregate"];
  EXPECT_DOUBLE_EQ(a["loss"].get<double>(), weighted / weight);
  EXPECT_DOUBLE_EQ(a["accuracy"].get<double>(), correct / valid);
  EXPECT_DOUBLE_EQ(a["accept_len"].get<double>(), accepted / blocks);
  EXPECT_EQ(a["records"], 4);
  EXPECT_EQ(a["skipped_records"], 1);
  // The same seed draws the same anchors; another draws others.
  EXPECT_EQ(eval(records, "--num-anchors 3 --seed 5").out, r.out);
  EXPECT_NE(eval(records, "--num-anchors 3 --seed 6").out, r.out);
  // The variable-prefix loss, prefix lengths sampled or given.
  const CliRun prefix = eval(records, "--num-anchors 3 --loss-type variable_prefix");
  ASSERT_EQ(prefix.exit_code, 0) << prefix.err;
  const json given = {
      {"input_ids", {5, 6, 7, 8, 9, 10, 11, 12}}, {"anchors", {1, 3}}, {"prefix_lengths", {2, 3}}};
  EXPECT_EQ(eval(given.dump() + "\n", "--loss-type variable_prefix").exit_code, 0);
}

TEST_F(DraftCli, EvalBadRecordsStopAtFileAndLine) {
  const std::string ok =
      R"({"input_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]})";
  const std::string ids = R"("input_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"{" + ids + R"(, "anchors": [13]})",
       "[anchors] row 0 block 0: anchor 13 is outside [0, 12] (block_size 4, 16 tokens)"},
      {"{" + ids + R"(, "anchors": [5, 3]})",
       "[anchors] row 0 block 1: anchor 3 comes before the previous 5 (anchors ascend)"},
      {"{" + ids + R"(, "anchors": [1, 2], "keep": [true]})",
       "\"keep\" must be a list of 2 bools, one per anchor"},
      {"{" + ids + R"(, "keep": [true]})",
       "\"keep\" and \"prefix_lengths\" describe given \"anchors\", and there are none"},
      {"{" + ids + R"(, "anchors": [1], "prefix_lengths": [2]})",
       "\"prefix_lengths\" need --loss-type variable_prefix"},
      {R"({"input_ids": [1, 96]})", "\"input_ids\"[1] = 96 is not a token id in [0, 96)"},
      {R"({"input_ids": [1, 2, 3], "loss_mask": [1, 1]})",
       "\"loss_mask\" has 2 entries for 3 tokens"},
      {R"({"input_ids": [1], "documents": []})",
       "a record needs exactly one of \"input_ids\" or \"documents\""},
      {R"({"documents": [{"input_ids": [1, 2]}, {"loss_mask": [1]}]})",
       "documents[1]. needs \"input_ids\""},
      {R"({"input_ids": [1, 2)", "malformed JSON"},
      {R"({"input_ids": [1, 2, 3], "lossmask": [0, 0, 0]})",
       "unknown key \"lossmask\" (did you mean \"loss_mask\"?)"},
      {R"({"documents": [{"input_ids": [1, 2], "loss_msk": [1, 1]}]})",
       "documents[0]: unknown key \"loss_msk\" (did you mean \"loss_mask\"?)"},
  };
  for (const auto& [record, reason] : bad) {
    const CliRun r = eval(ok + "\n" + record + "\n", "--out " + out);
    EXPECT_EQ(r.exit_code, 1) << record;
    EXPECT_NE(r.err.find("sprig: " + input + ":2: " + reason), std::string::npos) << record << "\n"
                                                                                  << r.err;
    EXPECT_FALSE(fs::exists(out)) << record;
  }
  // Usage errors exit 2; an existing output is refused before any work.
  EXPECT_EQ(eval(ok + "\n", "--grads").exit_code, 2);
  EXPECT_EQ(eval(ok + "\n", "--loss-type mse").exit_code, 2);
  testing::write_text(out, "keep me");
  const CliRun exists = eval(ok + "\n", "--out " + out);
  EXPECT_EQ(exists.exit_code, 1);
  EXPECT_EQ(exists.err, "sprig: [--out] " + out +
                            " already exists: choose another name, or give --overwrite to "
                            "replace it\n");
  EXPECT_EQ(exists.out, "");
  EXPECT_EQ(testing::read_text(out), "keep me");
  // --overwrite replaces only a safetensors file.
  const CliRun foreign = eval(ok + "\n", "--overwrite --out " + out);
  EXPECT_EQ(foreign.exit_code, 1);
  EXPECT_EQ(foreign.err, "sprig: [--out] " + out +
                             " is not a safetensors file that sprig wrote: refusing to replace "
                             "it, even with --overwrite\n");
  EXPECT_EQ(testing::read_text(out), "keep me");
}

// Records that score nothing (one token, every slot loss-masked, or no valid anchor) are skipped,
// and an input of nothing but those is an error, not a loss and accept_len of 0. The progress line
// counts them.
TEST_F(DraftCli, EvalWithNothingToScoreFails) {
  const std::string nothing =
      json{{"input_ids", {1}}}.dump() + "\n" +
      json{{"input_ids", {1, 2, 3, 4, 5, 6, 7, 8}}, {"loss_mask", std::vector<int>(8, 0)}}.dump() +
      "\n";
  for (const std::string recipe : {"dflash", "domino"}) {
    testing::write_text(input, nothing);
    const CliRun r = run_sprig("eval " + recipe + " --device cpu --target " + kGoldenDir +
                                   "qwen3_tiny --draft " + kGoldenDir + recipe + "_tiny --input " +
                                   input + " --out " + out,
                               dir);
    EXPECT_EQ(r.exit_code, 1) << recipe << r.out;
    // The progress line, a line per update in a log (the first and the last), then the error.
    EXPECT_EQ(r.err,
              "evaluated 1 records (1 skipped)\nevaluated 2 records (2 skipped)\nsprig: " + input +
                  ": nothing to score: every one of the 2 records was skipped (no valid "
                  "anchor or no supervised slot)\n")
        << recipe;
    EXPECT_EQ(r.out.find("aggregate"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(out));
  }
}

// Non-finite numbers are usage errors for every float option, and a number outside its setting's
// range is refused as the training config refuses it (one rule, one message).
TEST_F(DraftCli, EvalRefusesNonFiniteOptions) {
  const std::string ok = R"({"input_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]})"
                         "\n";
  testing::write_text(input, ok);
  const std::string base = " --target " + kGoldenDir + "qwen3_tiny --input " + input;
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"eval domino --draft " + kGoldenDir + "domino_tiny --lambda-base nan",
            "--lambda-base: must be a finite number, got nan"},
           {"eval jetspec --draft " + kGoldenDir + "dflash_tiny --kd-temperature inf",
            "--kd-temperature: must be a finite number, got inf"},
           {"eval dflash --draft " + kGoldenDir + "dflash_tiny --gamma nan",
            "--gamma: must be a finite number, got nan"},
           {"eval dflash --draft " + kGoldenDir + "dflash_tiny --prefix-weight-base inf",
            "--prefix-weight-base: must be a finite number, got inf"},
           {"eval domino --draft " + kGoldenDir + "domino_tiny --lambda-base 1.5",
            "--lambda-base: must be in [0, 1], got 1.5"},
           {"eval jetspec --draft " + kGoldenDir + "dflash_tiny --kd-temperature 0",
            "--kd-temperature: must be in [0.01, 100], got 0"},
           {"eval dflash --draft " + kGoldenDir + "dflash_tiny --prefix-weight-base 0",
            "--prefix-weight-base: must be in (0, 100], got 0"}}) {
    const CliRun r = run_sprig(args + base, dir);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
}

// --prefix-weight-base weighs the sampled prefix lengths of the variable-prefix loss: with the
// dflash loss, which samples none, it is a usage error.
TEST_F(DraftCli, EvalRefusesThePrefixWeightBaseOfTheDflashLoss) {
  const std::string record =
      R"({"input_ids": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]})"
      "\n";
  for (const char* args :
       {"--prefix-weight-base 0.5", "--loss-type dflash --prefix-weight-base 1"}) {
    const CliRun r = eval(record, args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err,
              "sprig: [eval dflash] --prefix-weight-base applies to --loss-type variable_prefix, "
              "not --loss-type dflash (see sprig eval dflash --help)\n")
        << args;
    EXPECT_EQ(r.out, "") << args;
  }
  const CliRun ok = eval(record, "--loss-type variable_prefix --prefix-weight-base 0.5");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// Without a tokenizer.json, engines take the ids of vocab.json and added_tokens.json: their
// largest must fit the draft's vocabulary of 96, and each must be a JSON object of ids.
TEST_F(DraftCli, ConvertChecksTheIdsOfVocabJsonAndAddedTokensJson) {
  const std::string tokens = dir + "/tokens";
  fs::create_directories(tokens);
  const auto convert = [&](const std::string& vocab, const std::string& added) {
    testing::write_text(tokens + "/vocab.json", vocab);
    fs::remove(tokens + "/added_tokens.json");
    if (!added.empty()) testing::write_text(tokens + "/added_tokens.json", added);
    fs::remove_all(dir + "/out");
    return run_sprig("convert --to-hf " + kGoldenDir + "dflash_tiny --out " + dir +
                         "/out --tokenizer-from " + tokens,
                     dir);
  };
  const CliRun fits = convert(R"({"a": 0, "b": 94})", R"({"<end>": 95})");
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_NE(fits.out.find("tokenizer files from " + tokens + ": vocab.json added_tokens.json"),
            std::string::npos)
      << fits.out;
  const std::string vocab = tokens + "/vocab.json";
  const std::string misfit = "[convert] the tokenizer of " + tokens +
                             " has 97 ids, past the draft's vocabulary of 96: a draft ships with "
                             "its target's tokenizer";
  const std::string not_an_id = ", not a token id (an integer in [0, 2^31))";
  struct Case {
    std::string vocab, added, message;
  };
  for (const Case& c : std::vector<Case>{
           {R"({"a": 0, "b": 94})", R"({"<end>": 96})", misfit},
           {R"({"a": 0, "b": 96})", "", misfit},
           {R"({"a": 0, "b": 18446744073709551615})", "",
            "[convert] " + vocab + ": \"b\" maps to 18446744073709551615" + not_an_id},
           {R"({"a": 0, "b": -1})", "", "[convert] " + vocab + ": \"b\" maps to -1" + not_an_id},
           {R"({"a": 0, "b": 1.0})", "", "[convert] " + vocab + ": \"b\" maps to 1.0" + not_an_id},
           {R"(["a", "b"])", "",
            "[convert] " + vocab + " must be a JSON object of token ids, {\"token\": id, ...}"},
           {R"({"a": 0, "a": 1})", "",
            vocab + ": is not valid JSON: key \"a\" appears twice in one object"},
       }) {
    const CliRun r = convert(c.vocab, c.added);
    EXPECT_EQ(r.exit_code, 1) << c.vocab;
    EXPECT_EQ(r.err, "sprig: " + c.message + "\n");
    EXPECT_FALSE(fs::exists(dir + "/out")) << c.vocab;
  }
}

// The positions rule (max_position_embeddings 128): two packed 70-token documents restart their
// positions and pass silently; one 130-token sequence warns, or is refused under
// --strict-positions before any output.
TEST_F(DraftCli, EvalWarnsPastTheTargetsPositionsByTheDeepestPosition) {
  std::vector<int64_t> ids(130);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(1 + i % 90);
  const json half(std::vector<int64_t>(ids.begin(), ids.begin() + 70));
  const json packed = {{"documents", {{{"input_ids", half}}, {{"input_ids", half}}}}};
  CliRun r = eval(packed.dump() + "\n", "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("max_position_embeddings"), std::string::npos) << r.err;
  const std::string record = json{{"input_ids", ids}}.dump() + "\n";
  r = eval(record, "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("sprig: [eval] warning: " + input +
                       ":1 reaches position 129, past the model's max_position_embeddings 128"),
            std::string::npos)
      << r.err;
  r = eval(record, "--strict-positions");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("sprig: [eval] " + input +
                       ":1 reaches position 129, past the model's max_position_embeddings 128 "
                       "(--strict-positions)"),
            std::string::npos)
      << r.err;
}

// Train a draft, export it, round-trip the export, and load it back for eval and as an init.
TEST_F(DraftCli, TrainExportAndLoadBack) {
  const std::string target = dir + "/target";
  fs::copy(kGoldenDir + "qwen3_tiny", target);
  testing::write_text(target + "/tokenizer.json",
                      R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},)"
                      R"( "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},)"
                      R"( "decoder": {"type": "ByteLevel"}})"
                      "\n");
  testing::write_text(target + "/tokenizer_config.json", "{}\n");
  const std::string config = dir + "/dflash.yaml";
  testing::write_text(config, "run_dir: " + dir + "/run\ndevice: cpu\ntarget:\n  path: " + target +
                                  "\ndraft:\n  mask_token_id: 95\n  num_layers: 1\n"
                                  "  block_size: 4\n  num_anchors: 6\ndata:\n  train: " +
                                  testing::source_dir() +
                                  "/train/configs/tiny_docs.jsonl\n  seq_len: 64\n"
                                  "  packing: dflash\n  micro_batch_size: 2\n"
                                  "train:\n  max_steps: 4\nlog:\n  every_steps: 2\n");
  const CliRun train = run_sprig("train dflash -c " + config, dir);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_NE(train.out.find("accept_len"), std::string::npos) << train.out;
  const std::string ckpt = dir + "/run/checkpoints/step_00000004";

  // The serving layout (docs/semantics.md §7.5): bf16, no prefix, no embedding or head.
  const std::string exported = dir + "/export";
  const CliRun convert = run_sprig("convert --to-hf " + ckpt + " --out " + exported, dir);
  ASSERT_EQ(convert.exit_code, 0) << convert.err;
  // The checkpoint carries the target's tokenizer files, so the export takes them from it.
  EXPECT_NE(convert.out.find("tokenizer files from " + ckpt +
                             ": tokenizer.json "
                             "tokenizer_config.json"),
            std::string::npos)
      << convert.out;
  const json c = json::parse(testing::read_text(exported + "/config.json"));
  EXPECT_EQ(c["architectures"], json({"DFlashDraftModel"}));
  EXPECT_EQ(c["model_type"], "qwen3");
  EXPECT_EQ(c["dtype"], "bfloat16");
  EXPECT_EQ(c["block_size"], 4);
  EXPECT_EQ(c["dflash_config"]["block_size"], 4);
  EXPECT_EQ(c["dflash_config"]["mask_token_id"], 95);
  EXPECT_EQ(c["num_target_layers"], 2);
  EXPECT_EQ(c["layer_types"], json({"full_attention"}));
  EXPECT_EQ(c["is_causal"], false);
  const SafetensorsFile weights(exported + "/model.safetensors");
  for (const StTensorInfo& t : weights.tensors()) {
    EXPECT_EQ(t.dtype, StDType::BF16) << t.name;
    EXPECT_NE(t.name.rfind("model.", 0), 0u) << t.name;
    EXPECT_EQ(t.name.find("embed_tokens"), std::string::npos);
    EXPECT_EQ(t.name.find("lm_head"), std::string::npos);
  }
  EXPECT_TRUE(weights.contains("fc.weight"));
  EXPECT_EQ(weights.info("fc.weight").shape, (Shape{48, 48}));  // one target layer
  EXPECT_EQ(testing::read_text(exported + "/tokenizer.json"),
            testing::read_text(target + "/tokenizer.json"));

  // An export of the export is the same bytes; an f32 export keeps the checkpoint's masters.
  ASSERT_EQ(run_sprig("convert --to-hf " + exported + " --out " + dir + "/again", dir).exit_code,
            0);
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.json"})
    EXPECT_EQ(testing::read_text(dir + "/again/" + file), testing::read_text(exported + "/" + file))
        << file;
  ASSERT_EQ(
      run_sprig("convert --to-hf " + ckpt + " --out " + dir + "/f32 --dtype f32", dir).exit_code,
      0);
  EXPECT_EQ(tensor_bytes(dir + "/f32/model.safetensors"),
            tensor_bytes(ckpt + "/model.safetensors"));
  // Writers refuse what they did not create.
  const CliRun refused = run_sprig("convert --to-hf " + ckpt + " --out " + exported, dir);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("already exists"), std::string::npos);
  // A tokenizer of 2408 ids does not fit the draft's 96: refused, nothing written.
  const std::string big = testing::source_dir() + "/tests/golden/tokenizer";
  const CliRun misfit = run_sprig(
      "convert --to-hf " + ckpt + " --out " + dir + "/misfit --tokenizer-from " + big, dir);
  EXPECT_EQ(misfit.exit_code, 1);
  EXPECT_EQ(misfit.err, "sprig: [convert] the tokenizer of " + big +
                            " has 2408 ids, past the draft's vocabulary of 96: a draft ships "
                            "with its target's tokenizer\n");
  EXPECT_FALSE(fs::exists(dir + "/misfit"));

  // Loaded back for eval: the f32 export scores exactly like the checkpoint, the bf16 one close.
  const std::string records =
      R"({"input_ids": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], "anchors": [0, 3, 6]})"
      "\n";
  testing::write_text(input, records);
  auto eval_with = [&](const std::string& draft) {
    return run_sprig(
        "eval dflash --device cpu --target " + target + " --draft " + draft + " --input " + input,
        dir);
  };
  const CliRun from_ckpt = eval_with(ckpt), from_f32 = eval_with(dir + "/f32");
  const CliRun from_bf16 = eval_with(exported);
  ASSERT_EQ(from_ckpt.exit_code, 0) << from_ckpt.err;
  EXPECT_EQ(from_f32.out, from_ckpt.out);
  EXPECT_EQ(eval_with(dir + "/run").out, from_ckpt.out);  // a run stands for its latest checkpoint
  const double loss = json_lines(from_ckpt.out)[0]["loss"].get<double>();
  EXPECT_NEAR(json_lines(from_bf16.out)[0]["loss"].get<double>(), loss, 2e-2 * loss);

  // The export as a training init (a learning rate too small to move an f32 weight: the weights
  // stay the export's), and imported as f32 masters.
  const CliRun init =
      run_sprig("train dflash -c " + config + " --run_dir=" + dir + "/run2 --draft.init=" + dir +
                    "/f32 --optimizer.lr=1e-30 --train.max_steps=1",
                dir);
  ASSERT_EQ(init.exit_code, 0) << init.err;
  EXPECT_EQ(tensor_bytes(dir + "/run2/checkpoints/step_00000001/model.safetensors"),
            tensor_bytes(ckpt + "/model.safetensors"));
  ASSERT_EQ(
      run_sprig("convert --from-hf " + exported + " --out " + dir + "/imported", dir).exit_code, 0);
  const SafetensorsFile imported(dir + "/imported/model.safetensors");
  EXPECT_EQ(imported.tensors().size(), weights.tensors().size());
  for (const StTensorInfo& t : weights.tensors()) {
    EXPECT_EQ(imported.info(t.name).dtype, StDType::F32);
    EXPECT_EQ(testing::max_abs_diff(imported.load(t.name), weights.load(t.name).to(DType::f32)),
              0.0)
        << t.name;
  }
}

// Domino and JetSpec: trained, exported with their serving keys, evaluated with their own
// metrics and options, and loaded back as a training init; a draft of another kind is refused.
class HeadDraftCli : public DraftCli, public ::testing::WithParamInterface<std::string> {};

TEST_P(HeadDraftCli, TrainExportEvalAndInit) {
  const std::string recipe = GetParam();
  const bool domino = recipe == "domino";
  const std::string target = kGoldenDir + "qwen3_tiny", config = dir + "/draft.yaml";
  testing::write_text(config, "run_dir: " + dir + "/run\ndevice: cpu\ntarget:\n  path: " + target +
                                  "\ndraft:\n  mask_token_id: 95\n  num_layers: 1\n"
                                  "  block_size: 4\n  num_anchors: 6\n" +
                                  (domino ? "  emb_dim: 8\n  gru_hidden_dim: 6\n" : "") +
                                  "data:\n  train: " + testing::source_dir() +
                                  "/train/configs/tiny_docs.jsonl\n  seq_len: 64\n"
                                  "  packing: dflash\n  micro_batch_size: 2\n"
                                  "train:\n  max_steps: 2\nlog:\n  every_steps: 1\n");
  const CliRun train = run_sprig("train " + recipe + " -c " + config, dir);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const std::string ckpt = dir + "/run/checkpoints/step_00000002", exported = dir + "/export";
  ASSERT_EQ(run_sprig("convert --to-hf " + ckpt + " --out " + exported, dir).exit_code, 0);
  const json c = json::parse(testing::read_text(exported + "/config.json"));
  EXPECT_EQ(c["architectures"], json({"DFlashDraftModel"}));
  const json& d = c["dflash_config"];
  if (domino) {  // the keys SGLang's Domino loader validates
    EXPECT_EQ(c["is_causal"], false);
    EXPECT_EQ(d["projector_type"], "domino");
    EXPECT_EQ(d["emb_dim"], 8);
    EXPECT_EQ(d["gru_hidden_dim"], 6);
    EXPECT_EQ(d["pure_draft_prefix_len"], 1);
    EXPECT_EQ(d["shift_label"], true);
    const SafetensorsFile w(exported + "/model.safetensors");
    EXPECT_EQ(w.info("prefix_gru.weight_ih_l0").shape, (Shape{18, 48}));
    EXPECT_EQ(w.info("prefix_gru.weight_hh_l0").shape, (Shape{18, 6}));
    EXPECT_EQ(w.info("embed_proj.0.weight").shape, (Shape{8, 54}));
    EXPECT_EQ(w.info("embed_proj.2.weight").shape, (Shape{96, 8}));
  } else {
    EXPECT_EQ(c["is_causal"], true);
    EXPECT_EQ(d["causal"], true);
    EXPECT_EQ(d["causal_head"], true);
  }

  testing::write_text(input,
                      R"({"input_ids": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], "anchors": [0, 3, 6]})"
                      "\n");
  const std::string option = domino ? " --lambda-base 0.5" : " --kd-temperature 2";
  const auto eval_with = [&](const std::string& draft, const std::string& args) {
    return run_sprig("eval " + recipe + " --device cpu --target " + target + " --draft " + draft +
                         " --input " + input + args,
                     dir);
  };
  const CliRun scored = eval_with(exported, option + " --grads --out " + out);
  ASSERT_EQ(scored.exit_code, 0) << scored.err;
  const json line = json_lines(scored.out)[0];
  if (domino) {
    for (const char* key : {"final_loss", "base_loss", "base_accuracy", "base_correct_tokens",
                            "base_accept_len", "base_accept_len_sum"})
      EXPECT_TRUE(line.contains(key)) << key;
    EXPECT_EQ(line["lambda_base"], 0.5);
    EXPECT_NEAR(line["loss"].get<double>(),
                0.5 * line["final_loss"].get<double>() + 0.5 * line["base_loss"].get<double>(),
                1e-6);
  } else {
    EXPECT_EQ(line["loss_weight"], line["valid_tokens"]);
  }
  const SafetensorsFile dumped(out);
  EXPECT_TRUE(dumped.contains(domino ? "0.grad.prefix_gru.weight_hh_l0" : "0.grad.fc.weight"));
  EXPECT_EQ(dumped.info("0.logits").shape, (Shape{12, 96}));
  // The checkpoint scores like its export (bf16) does, to rounding.
  const CliRun from_ckpt = eval_with(ckpt, option);
  ASSERT_EQ(from_ckpt.exit_code, 0) << from_ckpt.err;
  const double loss = json_lines(from_ckpt.out)[0]["loss"].get<double>();
  EXPECT_NEAR(line["loss"].get<double>(), loss, 2e-2 * loss + 1e-4);

  // The export as a training init of the same recipe; a plain DFlash draft is refused.
  const CliRun init = run_sprig("train " + recipe + " -c " + config + " --run_dir=" + dir +
                                    "/run2 --draft.init=" + exported + " --train.max_steps=1",
                                dir);
  EXPECT_EQ(init.exit_code, 0) << init.err;
  const CliRun wrong = eval_with(kGoldenDir + "dflash_tiny", "");
  EXPECT_EQ(wrong.exit_code, 1) << wrong.err;
  EXPECT_NE(wrong.err.find("is a dflash draft: a " + std::string(domino ? "Domino" : "JetSpec") +
                           " recipe needs"),
            std::string::npos)
      << wrong.err;
}

INSTANTIATE_TEST_SUITE_P(Recipes, HeadDraftCli, ::testing::Values("domino", "jetspec"));

}  // namespace
}  // namespace sprig
