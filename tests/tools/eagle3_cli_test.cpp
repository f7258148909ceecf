// End-to-end tests of the EAGLE-3 commands of the `sprig` executable (SPRIG_BIN): `data
// draft-vocab` counts the supervised tokens of documents into a draft vocabulary, and `train
// eagle3` with it writes checkpoints whose head covers those ids and that map them back as the
// engines read it (d2t, t2d); a resume with another vocabulary is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

#include "tensor/ops.h"
#include "tests/cli_run.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/nn/golden_check.h"
#include "tests/test_util.h"
#include "tests/tools/draft_cli_util.h"

namespace sprig {
namespace {

using json = nlohmann::json;
using testing::CliRun;
using testing::DraftCli;
using testing::run_sprig;

TEST_F(DraftCli, DraftVocabularyTrainsAnEagle3HeadOverItsIds) {
  const std::string docs = testing::source_dir() + "/train/configs/tiny_docs.jsonl";
  const std::string vocab = dir + "/vocab.json";
  const CliRun count = run_sprig(
      "data draft-vocab --input " + docs + " --size 16 --vocab-size 64 --out " + vocab, dir);
  ASSERT_EQ(count.exit_code, 0) << count.err;
  EXPECT_NE(count.out.find("16 of 64 ids, covering"), std::string::npos) << count.out;
  const json v = json::parse(testing::read_text(vocab));
  const std::vector<int64_t> ids = v.at("draft_to_target").get<std::vector<int64_t>>();
  ASSERT_EQ(ids.size(), 16u);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_GT(v.at("coverage").get<double>(), 16.0 / 64);  // frequent ids, not any ids

  const CliRun big = run_sprig(
      "data draft-vocab --input " + docs + " --size 65 --vocab-size 64 --out " + dir + "/x.json",
      dir);
  EXPECT_EQ(big.exit_code, 2);
  EXPECT_NE(big.err.find("the draft vocabulary of 65 ids is larger than the target's "
                         "--vocab-size 64"),
            std::string::npos)
      << big.err;

  const std::string config = dir + "/eagle3.yaml";
  const auto write_config = [&](const std::string& vocab_file) {
    testing::write_text(config, "run_dir: " + dir + "/run\ndevice: cpu\ntarget:\n  config: " +
                                    testing::source_dir() +
                                    "/train/configs/tiny_qwen3.json\ndraft:\n  aux_layer_ids: "
                                    "[0, 1]\n  ttt_steps: 2\n  vocab: " +
                                    vocab_file + "\ndata:\n  train: " + docs +
                                    "\n  seq_len: 64\n  packing: dflash\n  micro_batch_size: 2\n"
                                    "train:\n  max_steps: 2\nlog:\n  every_steps: 1\n");
  };
  write_config(vocab);
  const CliRun train = run_sprig("train eagle3 -c " + config, dir);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const std::string ckpt = dir + "/run/checkpoints/step_00000002";
  const json c = json::parse(testing::read_text(ckpt + "/config.json"));
  EXPECT_EQ(c["draft_vocab_size"], 16);
  EXPECT_EQ(c["vocab_size"], 64);
  const SafetensorsFile weights(ckpt + "/model.safetensors");
  EXPECT_EQ(weights.info("lm_head.weight").shape, (Shape{16, 64}));
  const std::vector<int64_t> d2t = weights.load("d2t").to_vector<int64_t>();
  const std::vector<int32_t> t2d = weights.load("t2d").to_vector<int32_t>();
  ASSERT_EQ(d2t.size(), 16u);
  ASSERT_EQ(t2d.size(), 64u);
  for (size_t i = 0; i < d2t.size(); ++i) {
    EXPECT_EQ(static_cast<int64_t>(i) + d2t[i], ids[i]) << i;
    EXPECT_EQ(t2d[static_cast<size_t>(ids[i])], 1) << i;
  }
  EXPECT_EQ(std::accumulate(t2d.begin(), t2d.end(), 0), 16);

  // spec-eval decodes with it, losslessly; --block-size is the DFlash drafts' option.
  const std::string prompts = dir + "/prompts.jsonl";
  testing::write_text(prompts, "{\"prompt_ids\": [3, 9, 1, 17]}\n{\"prompt_ids\": [40, 2]}\n");
  const std::string spec = "spec-eval --device cpu --target " + dir + "/run/target --draft " +
                           ckpt + " --input " + prompts + " --max-new-tokens 12";
  const CliRun decoded = run_sprig(spec + " --draft-tokens 2", dir);
  ASSERT_EQ(decoded.exit_code, 0) << decoded.err;
  const std::vector<json> lines = testing::json_lines(decoded.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[2]["aggregate"]["lossless_prompts"], 2);
  EXPECT_EQ(lines[2]["aggregate"]["acceptance_by_slot"].size(), 2u);
  EXPECT_NE(decoded.err.find("eagle3 draft, a chain of 2 drafts per step"), std::string::npos)
      << decoded.err;
  // A tree of two depths keeping 3 nodes each: lossless too.
  const CliRun tree = run_sprig(spec + " --draft-tokens 2 --tree-topk 3", dir);
  ASSERT_EQ(tree.exit_code, 0) << tree.err;
  EXPECT_EQ(testing::json_lines(tree.out)[2]["aggregate"]["lossless_prompts"], 2);
  EXPECT_NE(tree.err.find("eagle3 draft, a tree of the 3 best per depth of 6 drafts per step"),
            std::string::npos)
      << tree.err;
  const CliRun block = run_sprig(spec + " --block-size 3", dir);
  EXPECT_EQ(block.exit_code, 2);
  EXPECT_NE(block.err.find("--block-size applies to the DFlash drafts"), std::string::npos)
      << block.err;

  // The export: bf16 weights by the engines' names, d2t and t2d as they were, the launch lines;
  // spec-eval decodes with it as with the checkpoint.
  const std::string exported = dir + "/export";
  const CliRun convert = run_sprig("convert --to-hf " + ckpt + " --out " + exported, dir);
  ASSERT_EQ(convert.exit_code, 0) << convert.err;
  EXPECT_NE(convert.out.find("eagle3 draft (16 of 64 ids)"), std::string::npos) << convert.out;
  EXPECT_NE(
      convert.out.find("--speculative-config '{\"method\":\"eagle3\",\"model\":\"" + exported),
      std::string::npos)
      << convert.out;
  EXPECT_NE(
      convert.out.find("--speculative-algorithm EAGLE3 --speculative-draft-model-path " + exported),
      std::string::npos)
      << convert.out;
  EXPECT_NE(convert.out.find("note: this draft reads 2 target layers"), std::string::npos);
  const SafetensorsFile served(exported + "/model.safetensors");
  EXPECT_EQ(served.info("fc.weight").dtype, StDType::BF16);
  EXPECT_EQ(served.info("d2t").dtype, StDType::I64);
  EXPECT_EQ(served.info("t2d").dtype, StDType::BOOL);
  EXPECT_EQ(served.load("d2t").to_vector<int64_t>(), d2t);
  EXPECT_EQ(json::parse(testing::read_text(exported + "/config.json"))["torch_dtype"], "bfloat16");
  const CliRun again = run_sprig("spec-eval --device cpu --target " + dir + "/run/target --draft " +
                                     exported + " --input " + prompts + " --max-new-tokens 12",
                                 dir);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(testing::json_lines(again.out)[2]["aggregate"]["lossless_prompts"], 2);
  const CliRun serve =
      run_sprig("convert --to-hf " + ckpt + " --out " + dir + "/x --serve vllm", dir);
  EXPECT_EQ(serve.exit_code, 2);

  // Resuming with another vocabulary would train the head's rows for other ids.
  const std::string other = dir + "/other.json";
  std::vector<int64_t> shifted(ids);
  shifted.back() = shifted.back() == 63 ? 62 : 63;
  std::sort(shifted.begin(), shifted.end());
  testing::write_text(
      other, json{{"format", "sprig-draft-vocab"}, {"vocab_size", 64}, {"draft_to_target", shifted}}
                 .dump());
  write_config(other);
  const CliRun resume =
      run_sprig("train eagle3 -c " + config + " --resume --train.max_steps=3", dir);
  EXPECT_EQ(resume.exit_code, 1);
  EXPECT_NE(resume.err.find("the checkpoint's draft has another draft_to_target (draft.vocab) "
                            "than this config"),
            std::string::npos)
      << resume.err;
}

// A DFlash draft over 16 of the target's 64 ids: trained from the command line, its checkpoint
// evaluates on records of any target id (a label outside the vocabulary a miss), exports its head's
// rows and map with a note for SGLang, and decodes losslessly.
TEST_F(DraftCli, DraftVocabularyTrainsADFlashDraftThatEvaluatesAndDecodes) {
  const std::string docs = testing::source_dir() + "/train/configs/tiny_docs.jsonl";
  const std::string vocab = dir + "/vocab.json";
  ASSERT_EQ(
      run_sprig("data draft-vocab --input " + docs + " --size 16 --vocab-size 64 --out " + vocab,
                dir)
          .exit_code,
      0);
  const std::string config = dir + "/dflash.yaml";
  testing::write_text(config, "run_dir: " + dir +
                                  "/run\ndevice: cpu\ntarget:\n  config: " + testing::source_dir() +
                                  "/train/configs/tiny_qwen3.json\ndraft:\n  mask_token_id: 63\n"
                                  "  num_layers: 1\n  block_size: 4\n  num_anchors: 8\n  vocab: " +
                                  vocab + "\ndata:\n  train: " + docs +
                                  "\n  seq_len: 64\n  packing: dflash\n  micro_batch_size: 2\n"
                                  "train:\n  max_steps: 2\nlog:\n  every_steps: 1\n");
  const CliRun train = run_sprig("train dflash -c " + config, dir);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const std::string ckpt = dir + "/run", target = dir + "/run/target";
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 20; ++i) ids.push_back(62 - 3 * i);  // ids past the draft's 16 rows
  testing::write_text(input, json{{"input_ids", ids}}.dump() + "\n");
  const CliRun eval = run_sprig("eval dflash --device cpu --target " + target + " --draft " + ckpt +
                                    " --input " + input + " --out " + out,
                                dir);
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const std::vector<json> lines = testing::json_lines(eval.out);
  EXPECT_GT(lines[0]["valid_tokens"].get<double>(), 0) << eval.out;
  EXPECT_EQ(SafetensorsFile(out).info("0.logits").shape[1], 16);  // the draft's columns

  const std::string exported = dir + "/export";
  const CliRun convert = run_sprig("convert --to-hf " + ckpt + " --out " + exported, dir);
  ASSERT_EQ(convert.exit_code, 0) << convert.err;
  EXPECT_NE(convert.out.find("dflash draft (16 of 64 ids)"), std::string::npos) << convert.out;
  EXPECT_NE(convert.out.find("SGLang's DFLASH ignores them"), std::string::npos) << convert.out;
  const SafetensorsFile weights(exported + "/model.safetensors");
  EXPECT_EQ(weights.info("lm_head.weight").shape, (Shape{16, 64}));
  EXPECT_TRUE(weights.contains("d2t") && weights.contains("t2d"));

  const std::string prompts = dir + "/prompts.jsonl";
  testing::write_text(prompts, "{\"prompt_ids\": [3, 9, 1, 17]}\n");
  const CliRun decoded = run_sprig("spec-eval --device cpu --target " + target + " --draft " +
                                       exported + " --input " + prompts + " --max-new-tokens 10",
                                   dir);
  ASSERT_EQ(decoded.exit_code, 0) << decoded.err;
  EXPECT_EQ(testing::json_lines(decoded.out)[1]["aggregate"]["lossless_prompts"], 1);
}

// The golden packed case (tests/golden/make_eagle3_golden.py) as one record of three documents:
// `eval eagle3 --grads` gives PyTorch's loss, per-step counts, logits and gradients.
TEST_F(DraftCli, EvalEagle3ReproducesThePyTorchNumbers) {
  const SafetensorsFile golden(testing::kGoldenDir + "eagle3_tiny_expected.safetensors");
  // The golden draft in the engines' layout: its config.json, its weights by their names.
  const std::string draft = dir + "/draft";
  std::filesystem::create_directories(draft);
  testing::write_text(draft + "/config.json",
                      json{{"architectures", {"LlamaForCausalLMEagle3"}},
                           {"model_type", "llama"},
                           {"vocab_size", 96},
                           {"draft_vocab_size", 96},
                           {"hidden_size", 48},
                           {"intermediate_size", 80},
                           {"num_hidden_layers", 1},
                           {"num_attention_heads", 4},
                           {"num_key_value_heads", 2},
                           {"head_dim", 64},
                           {"rms_norm_eps", 1e-6},
                           {"rope_theta", 10000.0},
                           {"max_position_embeddings", 128},
                           {"tie_word_embeddings", false},
                           {"torch_dtype", "float32"},
                           {"eagle_config", {{"eagle_aux_hidden_state_layer_ids", {0, 1}}}}}
                          .dump());
  const SafetensorsFile reference(testing::kGoldenDir + "eagle3_tiny/model.safetensors");
  const auto served = [](std::string name) {  // the reference's names as the engines read them
    if (name.rfind("model.layers.0.", 0) == 0) return "midlayer." + name.substr(15);
    return name.rfind("model.", 0) == 0 ? name.substr(6) : name;
  };
  std::vector<SafetensorsEntry> weights;
  for (const StTensorInfo& t : reference.tensors())
    weights.push_back({served(t.name), reference.load(t.name)});
  save_safetensors(draft + "/model.safetensors", weights);

  const Tensor ids = golden.load("packed.input_ids").select(0, 0);
  const Tensor mask = golden.load("packed.loss_mask").select(0, 0);
  json documents = json::array();
  for (const auto& [begin, end] : {std::pair{0, 5}, {5, 9}, {9, 14}})
    documents.push_back(
        {{"input_ids", ids.slice(0, begin, end).contiguous().to_vector<int64_t>()},
         {"loss_mask", mask.slice(0, begin, end).contiguous().to_vector<int64_t>()}});
  testing::write_text(input, json{{"documents", documents}}.dump() + "\n");
  const CliRun r =
      run_sprig("eval eagle3 --device cpu --target " + testing::kGoldenDir + "qwen3_tiny --draft " +
                    draft + " --input " + input + " --ttt-steps 3 --out " + out + " --grads",
                dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const SafetensorsFile got(out);
  const double loss = golden.load("packed.loss").item();
  EXPECT_NEAR(got.load("0.loss").item(), loss, 1e-5 * loss);
  EXPECT_EQ(got.load("0.step_valid").to_vector<double>(),
            golden.load("packed.step_valid").to_vector<double>());
  EXPECT_EQ(got.load("0.step_correct").to_vector<double>(),
            golden.load("packed.step_correct").to_vector<double>());
  EXPECT_EQ(got.load("0.accept_len_sum").item(), golden.load("packed.accept_len_sum").item());
  EXPECT_LE(testing::relative_error(got.load("0.logits"), golden.load("packed.logits")), 1e-5);
  int grads = 0;
  for (const StTensorInfo& t : golden.tensors()) {
    const std::string prefix = "packed.grad.";
    if (t.name.rfind(prefix, 0) != 0) continue;
    const std::string param = served(t.name.substr(prefix.size()));
    EXPECT_LE(testing::relative_error(got.load("0.grad." + param), golden.load(t.name)), 1e-4)
        << param;
    ++grads;
  }
  EXPECT_EQ(grads, 13);
}

// A draft saved by the reference's recipe (tests/golden/make_eagle3_reference.py), given as its
// checkpoint directory: `eval eagle3 --grads` on the packed case's documents gives the reference
// trainer module's loss, accuracy, chain counts and gradients (targets: metrics within 1e-4
// relative, gradients within 2e-3, in f32).
TEST_F(DraftCli, EvalEagle3ReproducesTheReferenceTrainerModule) {
  const std::string fixtures = testing::kGoldenDir + "reference_eagle3/";
  const SafetensorsFile golden(testing::kGoldenDir + "reference_eagle3_expected.safetensors");
  const auto get = [&](const std::string& key) { return golden.load("packed_reduced." + key); };
  const Tensor ids = get("input_ids").select(0, 0), mask = get("loss_mask").select(0, 0);
  json documents = json::array();
  for (const auto& [begin, end] : {std::pair{0, 10}, {10, 24}})
    documents.push_back(
        {{"input_ids", ids.slice(0, begin, end).contiguous().to_vector<int64_t>()},
         {"loss_mask", mask.slice(0, begin, end).contiguous().to_vector<int64_t>()}});
  testing::write_text(input, json{{"documents", documents}}.dump() + "\n");
  const CliRun r =
      run_sprig("eval eagle3 --device cpu --target " + fixtures + "target --draft " + fixtures +
                    "packed_reduced --input " + input + " --ttt-steps 3 --out " + out + " --grads",
                dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const SafetensorsFile got(out);
  const double loss = get("loss").item();
  EXPECT_NEAR(got.load("0.loss").item(), loss, 1e-4 * loss);
  EXPECT_NEAR(got.load("0.accuracy").item(), get("accuracy").item(), 1e-4);
  EXPECT_EQ(got.load("0.step_prefix_hits").to_vector<double>(),
            get("step_prefix_hits").to_vector<double>());
  EXPECT_EQ(got.load("0.step_prefix_valid").to_vector<double>(),
            get("step_valid").to_vector<double>());
  // sprig holds the head's rows in the ascending order of their ids, the reference by frequency.
  const std::vector<int64_t> by_frequency =
      json::parse(golden.metadata().at("cases"))["packed_reduced"]["vocab"]
          .get<std::vector<int64_t>>();
  std::vector<int64_t> order(by_frequency.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return by_frequency[a] < by_frequency[b]; });
  int grads = 0;
  for (const StTensorInfo& t : golden.tensors()) {
    const std::string prefix = "packed_reduced.grad.";
    if (t.name.rfind(prefix, 0) != 0) continue;
    std::string param = t.name.substr(prefix.size());
    if (param.rfind("model.layers.0.", 0) == 0) param = "midlayer." + param.substr(15);
    if (param.rfind("model.", 0) == 0) param = param.substr(6);
    Tensor expected = golden.load(t.name);
    if (param == "lm_head.weight")
      expected = index_select(expected, 0,
                              Tensor::from_vector(order, {static_cast<int64_t>(order.size())}));
    EXPECT_LE(testing::relative_error(got.load("0.grad." + param), expected), 2e-3) << param;
    ++grads;
  }
  EXPECT_EQ(grads, 13);
}

}  // namespace
}  // namespace sprig
