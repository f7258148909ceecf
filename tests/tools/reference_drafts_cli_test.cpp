// The reference implementation's drafts (tests/golden/reference_drafts) through the `sprig`
// executable: evaluated, speculatively decoded and used as training inits as their own kinds, and
// exported per serving engine, with what each engine cannot serve refused or noted.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

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

// Drafts saved by the reference implementation (tests/golden/reference_drafts) are evaluated as
// their own kinds, a Domino draft's spec-eval shows tau without its head, and `convert --to-hf`
// writes each engine's layout (or says what the engine cannot serve) with the launch lines.
TEST_F(DraftCli, ReferenceDraftsEvalSpecEvalAndExportPerEngine) {
  const std::string target = kGoldenDir + "qwen3_tiny", refs = kGoldenDir + "reference_drafts/";
  testing::write_text(input,
                      R"({"input_ids": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8], "anchors": [0, 3, 6]})"
                      "\n");
  for (const std::string kind : {"dflash", "domino", "jetspec"}) {
    const CliRun r = run_sprig("eval " + kind + " --device cpu --target " + target + " --draft " +
                                   refs + kind + " --input " + input,
                               dir);
    EXPECT_EQ(r.exit_code, 0) << kind << ": " << r.err;
  }
  testing::write_text(dir + "/prompts.jsonl", R"({"prompt_ids": [3, 1, 4, 1, 5]})"
                                              "\n");
  const auto spec_eval = [&](const std::string& draft) {
    return run_sprig("spec-eval --device cpu --target " + target + " --draft " + draft +
                         " --input " + dir + "/prompts.jsonl --max-new-tokens 12",
                     dir);
  };
  for (const std::string kind : {"dflash", "domino", "jetspec"}) {
    const CliRun spec = spec_eval(refs + kind);
    ASSERT_EQ(spec.exit_code, 0) << kind << ": " << spec.err;
    const json line = json_lines(spec.out).front();
    EXPECT_TRUE(line["lossless"].get<bool>()) << kind << ": " << spec.out;
    EXPECT_EQ(line.contains("tau_without_head"), kind == "domino") << kind << ": " << spec.out;
    EXPECT_NE(spec.err.find("spec-eval: " + kind + " draft, block 4"), std::string::npos)
        << kind << ": " << spec.err;
  }
  const CliRun spec = spec_eval(refs + "domino");
  EXPECT_NE(spec.err.find("without the correction head (base logits alone): tau"),
            std::string::npos)
      << spec.err;

  // The reference's JetSpec checkpoint, exported: both causality keys say causal.
  const CliRun jet = run_sprig("convert --to-hf " + refs + "jetspec --out " + dir + "/jet", dir);
  ASSERT_EQ(jet.exit_code, 0) << jet.err;
  const json j = json::parse(testing::read_text(dir + "/jet/config.json"));
  EXPECT_EQ(j["architectures"], json({"DFlashDraftModel"}));
  EXPECT_EQ(j["is_causal"], true);
  EXPECT_EQ(j["dflash_config"]["causal"], true);
  EXPECT_EQ(j["torch_dtype"], "bfloat16");
  const std::string abs = fs::absolute(dir + "/jet").lexically_normal().string();
  EXPECT_NE(jet.out.find("serve it with:\n  vllm serve <target model> --speculative-config "
                         "'{\"method\":\"dflash\",\"model\":\"" +
                         abs + "\",\"num_speculative_tokens\":3}'\n"),
            std::string::npos)
      << jet.out;
  EXPECT_NE(jet.out.find("note: SGLang has no in-block causal draft attention"), std::string::npos);
  const CliRun sglang_jet =
      run_sprig("convert --to-hf " + refs + "jetspec --out " + dir + "/s --serve sglang", dir);
  EXPECT_EQ(sglang_jet.exit_code, 1);
  EXPECT_NE(sglang_jet.err.find("[serve] SGLang's DFLASH worker drafts blocks bidirectionally"),
            std::string::npos)
      << sglang_jet.err;
  EXPECT_FALSE(fs::exists(dir + "/s"));

  // Domino: refused for vLLM, served by SGLang, the reference's layout on request.
  const CliRun vllm =
      run_sprig("convert --to-hf " + refs + "domino --out " + dir + "/v --serve vllm", dir);
  EXPECT_EQ(vllm.exit_code, 1);
  EXPECT_NE(vllm.err.find("[serve] vLLM has no Domino runtime"), std::string::npos) << vllm.err;
  EXPECT_FALSE(fs::exists(dir + "/v"));
  const CliRun sg =
      run_sprig("convert --to-hf " + refs + "domino --out " + dir + "/sg --serve sglang", dir);
  ASSERT_EQ(sg.exit_code, 0) << sg.err;
  EXPECT_NE(sg.out.find("--speculative-algorithm DFLASH --speculative-draft-model-path "),
            std::string::npos)
      << sg.out;
  EXPECT_EQ(sg.out.find("vllm serve"), std::string::npos) << sg.out;
  const json d = json::parse(testing::read_text(dir + "/sg/config.json"));
  EXPECT_EQ(d["emb_dim"], 16);
  EXPECT_EQ(d["dflash_config"]["emb_dim"], 16);
  const CliRun ref = run_sprig(
      "convert --to-hf " + refs + "domino --out " + dir + "/ref --serve reference --dtype f32",
      dir);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  EXPECT_EQ(json::parse(testing::read_text(dir + "/ref/config.json"))["architectures"],
            json({"Qwen3DFlashDraftModel"}));
  EXPECT_EQ(tensor_bytes(dir + "/ref/model.safetensors"),
            tensor_bytes(refs + "domino/model.safetensors"));
  EXPECT_EQ(run_sprig("convert --to-hf " + refs + "domino --out " + dir + "/x --serve tgi", dir)
                .exit_code,
            2);

  // --drop-correction-head: refused for a draft trained with shifted labels (an engine would read
  // each slot one position off); without them, the DFlash part alone is written for vLLM, and it
  // decodes exactly as the Domino draft does from its base logits (spec-eval's tau_without_head).
  const CliRun shifted = run_sprig(
      "convert --to-hf " + refs + "domino --out " + dir + "/d --serve vllm --drop-correction-head",
      dir);
  EXPECT_EQ(shifted.exit_code, 1);
  EXPECT_NE(shifted.err.find("[serve] --drop-correction-head: this Domino draft was trained with "
                             "shift_label"),
            std::string::npos)
      << shifted.err;
  EXPECT_FALSE(fs::exists(dir + "/d"));
  const std::string unshifted = dir + "/unshifted";
  fs::copy(refs + "domino", unshifted);
  json u = json::parse(testing::read_text(unshifted + "/config.json"));
  u["dflash_config"]["shift_label"] = false;
  testing::write_text(unshifted + "/config.json", u.dump());
  const CliRun dropped = run_sprig("convert --to-hf " + unshifted + " --out " + dir +
                                       "/dropped --serve vllm --drop-correction-head --dtype f32",
                                   dir);
  ASSERT_EQ(dropped.exit_code, 0) << dropped.err;
  EXPECT_NE(dropped.out.find("note: the Domino correction head is not exported: decoding uses the "
                             "backbone's base logits (`sprig spec-eval` shows tau with and "
                             "without the head)"),
            std::string::npos)
      << dropped.out;
  EXPECT_NE(dropped.out.find("vllm serve <target model> --speculative-config "
                             "'{\"method\":\"dflash\""),
            std::string::npos)
      << dropped.out;
  const json plain = json::parse(testing::read_text(dir + "/dropped/config.json"));
  EXPECT_FALSE(plain["dflash_config"].contains("projector_type")) << plain.dump();
  const SafetensorsFile dropped_weights(dir + "/dropped/model.safetensors");
  for (const StTensorInfo& t : dropped_weights.tensors())
    EXPECT_TRUE(t.name.find("prefix_gru") == std::string::npos &&
                t.name.find("embed_proj") == std::string::npos)
        << t.name;
  const CliRun with_head = spec_eval(unshifted), without = spec_eval(dir + "/dropped");
  ASSERT_EQ(with_head.exit_code, 0) << with_head.err;
  ASSERT_EQ(without.exit_code, 0) << without.err;
  const json with_line = json_lines(with_head.out).front(),
             without_line = json_lines(without.out).front();
  EXPECT_EQ(without_line["tau"], with_line["tau_without_head"]) << with_head.out << without.out;
  EXPECT_EQ(without_line["output_ids"], with_line["output_ids"]);  // both lossless

  // Each reference draft as the init of a run of its own recipe.
  for (const std::string kind : {"dflash", "domino", "jetspec"}) {
    const std::string config = dir + "/" + kind + ".yaml";
    testing::write_text(config, "run_dir: " + dir + "/run_" + kind + "\ndevice: cpu\ntarget:\n" +
                                    "  path: " + target +
                                    "\ndraft:\n  mask_token_id: 95\n  block_size: 4\n  init: " +
                                    refs + kind + "\ndata:\n  train: " + testing::source_dir() +
                                    "/train/configs/tiny_docs.jsonl\n  seq_len: 64\n"
                                    "  packing: dflash\n  micro_batch_size: 2\n"
                                    "train:\n  max_steps: 1\n");
    const CliRun init = run_sprig("train " + kind + " -c " + config, dir);
    EXPECT_EQ(init.exit_code, 0) << kind << ": " << init.err;
  }
}

}  // namespace
}  // namespace sprig
