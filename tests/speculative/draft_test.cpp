// The draft model's config and files: the default target layers (E15, with banker's rounding),
// the config derived from a target and its errors, the serving layout's config.json (the export
// checklist of docs/semantics.md §7.5, with Domino's and JetSpec's keys), and drafts saved and
// loaded back bit for bit.
#include "speculative/draft.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "speculative/domino.h"
#include "speculative/draft_kind.h"
#include "speculative/serving.h"
#include "tests/nn/checkpoint_fixtures.h"
#include "tests/test_util.h"

namespace sprig::speculative {
namespace {

namespace fs = std::filesystem;

QwenConfig target_config() {
  return QwenConfig::from_json({{"model_type", "qwen3"},
                                {"vocab_size", 40},
                                {"hidden_size", 16},
                                {"intermediate_size", 24},
                                {"num_hidden_layers", 6},
                                {"num_attention_heads", 2},
                                {"num_key_value_heads", 1},
                                {"head_dim", 8},
                                {"rope_theta", 5e5},
                                {"tie_word_embeddings", true}});
}

DraftOptions options() {
  DraftOptions o;
  o.num_layers = 2;
  o.block_size = 4;
  o.mask_token_id = 39;
  return o;
}

TEST(DraftConfig, E15DefaultTargetLayers) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(default_target_layer_ids(36, 5), V({1, 9, 17, 25, 33}));
  EXPECT_EQ(default_target_layer_ids(28, 5), V({1, 7, 13, 19, 25}));
  EXPECT_EQ(default_target_layer_ids(48, 5), V({1, 12, 23, 34, 45}));
  EXPECT_EQ(default_target_layer_ids(64, 5), V({1, 16, 31, 46, 61}));
  EXPECT_EQ(default_target_layer_ids(32, 5), V({1, 8, 15, 22, 29}));
  EXPECT_EQ(default_target_layer_ids(36, 1), V({18}));
  EXPECT_EQ(default_target_layer_ids(31, 3), V({1, 14, 28}));  // 14.5 rounds to even
}

TEST(DraftConfig, FollowsTheTarget) {
  const DraftConfig c = draft_config_for(target_config(), options());
  EXPECT_EQ(c.layers.model_type, "qwen3");
  EXPECT_EQ(c.layers.num_hidden_layers, 2);
  EXPECT_EQ(c.layers.hidden_size, 16);
  EXPECT_EQ(c.layers.vocab_size, 40);
  EXPECT_EQ(c.layers.head_dim, 8);
  EXPECT_EQ(c.layers.rope.theta, 5e5);
  EXPECT_EQ(c.num_target_layers, 6);
  EXPECT_EQ(c.target_layer_ids, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c.context_width(), 32);
  DraftOptions o = options();
  o.num_attention_heads = 4;
  o.num_key_value_heads = 2;
  o.head_dim = 16;
  const DraftConfig wide = draft_config_for(target_config(), o);
  EXPECT_EQ(wide.layers.num_attention_heads, 4);
  EXPECT_EQ(wide.layers.head_dim, 16);
}

TEST(DraftConfig, BadOptionsGiveOneSentence) {
  const auto error = [](DraftOptions o) {
    return testing::invalid_argument_message([&] { draft_config_for(target_config(), o); });
  };
  DraftOptions o = options();
  o.mask_token_id = 40;
  EXPECT_EQ(error(o), "[draft] mask_token_id 40 is outside the target's vocabulary [0, 40)");
  o = options();
  o.mask_token_id = -1;
  EXPECT_EQ(error(o).rfind("[draft] mask_token_id is required", 0), 0u);
  o = options();
  o.target_layer_ids = {0, 6};
  EXPECT_EQ(error(o), "[draft] target_layer_ids holds 6, outside the target's layers [0, 6)");
  o = options();
  o.block_size = 1;
  EXPECT_EQ(error(o), "[draft] block_size must be >= 2, got 1");
  // A block's slots are positions: an absurd block size is refused before anything is allocated.
  o = options();
  o.block_size = 1000000000;
  EXPECT_EQ(error(o), "[draft] block_size 1000000000 is more than max_position_embeddings 32768");
}

// A draft whose parameters cannot fit in memory is refused naming its largest part.
TEST(DraftConfig, AbsurdSizesNameTheKeyBeforeAnyAllocation) {
  DraftConfig c = draft_config_for(target_config(), options());
  c.layers.hidden_size = 1000000000;
  Generator gen(0);
  try {
    DFlashDraft draft(c, gen);
    FAIL() << "built";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("[draft] ", 0), 0u) << message;
    EXPECT_NE(message.find("the largest part is fc: 2 target_layer_ids x hidden_size "
                           "1000000000 x hidden_size 1000000000"),
              std::string::npos)
        << message;
  }
}

// A draft rotates its positions as its target does: a YaRN target's scaling goes into the draft
// and into its exported config, and reads back the same.
TEST(DraftConfig, KeepsTheTargetsRopeScaling) {
  nlohmann::json t = target_config().to_json();
  t["max_position_embeddings"] = 4096;
  t["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 1024}};
  const QwenConfig target = QwenConfig::from_json(t, "target");
  const DraftConfig c = draft_config_for(target, options());
  EXPECT_EQ(c.layers.rope.type, RopeType::yarn);
  EXPECT_EQ(c.layers.rope.to_json(), target.rope.to_json());
  const nlohmann::json j = c.to_json(DType::bf16);
  EXPECT_EQ(j["rope_scaling"]["rope_type"], "yarn");
  EXPECT_EQ(j["rope_parameters"]["original_max_position_embeddings"], 1024);
  EXPECT_EQ(DraftConfig::from_json(j, "config.json").layers.rope.to_json(), target.rope.to_json());
}

TEST(DraftConfig, ADraftFitsOnlyItsKindOfTarget) {
  const DraftConfig c = draft_config_for(target_config(), options());
  EXPECT_NO_THROW(check_draft_fits(c, target_config(), "d"));
  QwenConfig other = target_config();
  other.vocab_size = 41;
  EXPECT_EQ(testing::invalid_argument_message([&] { check_draft_fits(c, other, "--draft d"); }),
            "[draft] --draft d drafts for a target of hidden size 16, vocabulary 40 and 6 "
            "layers, not this one's 16, 41 and 6");
}

TEST(DraftConfig, TheServingLayoutChecklist) {
  DraftOptions o = options();
  o.sliding_window = 8;
  const DraftConfig c = draft_config_for(target_config(), o);
  const nlohmann::json j = c.to_json(DType::bf16);
  EXPECT_EQ(j["architectures"], nlohmann::json({"DFlashDraftModel"}));
  EXPECT_EQ(j["model_type"], "qwen3");
  EXPECT_EQ(j["block_size"], 4);
  EXPECT_EQ(j["dflash_config"]["block_size"], 4);
  EXPECT_EQ(j["dflash_config"]["mask_token_id"], 39);
  EXPECT_EQ(j["dflash_config"]["target_layer_ids"], nlohmann::json({1, 3}));
  EXPECT_EQ(j["num_target_layers"], 6);
  EXPECT_EQ(j["layer_types"], nlohmann::json({"sliding_attention", "sliding_attention"}));
  EXPECT_EQ(j["sliding_window"], 8);
  EXPECT_EQ(j["use_sliding_window"], true);
  EXPECT_EQ(j["max_window_layers"], 2);
  EXPECT_EQ(j["is_causal"], false);
  EXPECT_EQ(j["dflash_config"]["causal"], false);
  EXPECT_EQ(j["rope_theta"], 5e5);
  EXPECT_EQ(j["rope_parameters"]["rope_theta"], 5e5);
  EXPECT_EQ(j["dtype"], "bfloat16");
  EXPECT_EQ(j["torch_dtype"], "bfloat16");  // what transformers 4 and older engines read
  // Read back, the same draft.
  const DraftConfig back = DraftConfig::from_json(j, "config.json");
  EXPECT_EQ(back.block_size, c.block_size);
  EXPECT_EQ(back.mask_token_id, c.mask_token_id);
  EXPECT_EQ(back.target_layer_ids, c.target_layer_ids);
  EXPECT_EQ(back.num_target_layers, c.num_target_layers);
  EXPECT_EQ(back.sliding_window, 8);
  EXPECT_EQ(back.causal, false);
  EXPECT_EQ(back.layers.num_hidden_layers, 2);
  EXPECT_EQ(back.layers.hidden_size, 16);
  // JetSpec-style drafts are causal in both keys.
  o.causal = true;
  EXPECT_EQ(draft_config_for(target_config(), o).to_json(DType::bf16)["is_causal"], true);
}

DominoHeadConfig small_head() {
  return {.emb_dim = 6, .gru_hidden_dim = 5, .pure_draft_prefix_len = 1, .shift_label = true};
}

TEST(DraftConfig, DominoAndJetSpecServingKeys) {
  DraftOptions o = options();
  o.head = domino_head(small_head());
  const DraftConfig domino = draft_config_for(target_config(), o);
  EXPECT_EQ(domino.kind().name(), "domino");
  const nlohmann::json j = domino.to_json(DType::bf16);
  const nlohmann::json& d = j["dflash_config"];
  EXPECT_EQ(j["architectures"], nlohmann::json({"DFlashDraftModel"}));
  EXPECT_EQ(d["projector_type"], "domino");
  EXPECT_EQ(d["emb_dim"], 6);
  EXPECT_EQ(d["gru_hidden_dim"], 5);
  EXPECT_EQ(d["pure_draft_prefix_len"], 1);
  EXPECT_EQ(d["shift_label"], true);
  EXPECT_EQ(j["emb_dim"], 6);  // repeated at the top level, as Domino's published configs do
  EXPECT_EQ(j["is_causal"], false);
  EXPECT_EQ(d["causal"], false);
  EXPECT_FALSE(d.contains("causal_head"));
  const DraftConfig back = DraftConfig::from_json(j, "config.json");
  ASSERT_EQ(back.kind().name(), "domino");
  EXPECT_EQ(domino_head_config(back), small_head());
  // Keys the reference loader defaults: no pure prefix, unshifted labels.
  nlohmann::json sparse = j;
  sparse["dflash_config"].erase("pure_draft_prefix_len");
  sparse["dflash_config"].erase("shift_label");
  const DraftConfig defaulted = DraftConfig::from_json(sparse, "c");
  EXPECT_EQ(domino_head_config(defaulted).pure_draft_prefix_len, 0);
  EXPECT_FALSE(domino_head_config(defaulted).shift_label);

  o = options();
  o.causal = true;
  const nlohmann::json jet = draft_config_for(target_config(), o).to_json(DType::bf16);
  EXPECT_EQ(jet["is_causal"], true);
  EXPECT_EQ(jet["dflash_config"]["causal"], true);
  EXPECT_EQ(jet["dflash_config"]["causal_head"], true);
  EXPECT_FALSE(jet["dflash_config"].contains("projector_type"));
  EXPECT_EQ(DraftConfig::from_json(jet, "c").kind().name(), "jetspec");
}

TEST(DraftConfig, DominoAndProjectorErrors) {
  DraftOptions o = options();
  o.head = domino_head(small_head());
  nlohmann::json j = draft_config_for(target_config(), o).to_json(DType::f32);
  j["dflash_config"]["projector_type"] = "eagle";
  try {
    DraftConfig::from_json(j, "d/config.json");
    FAIL() << "read";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "d/config.json: unknown \"dflash_config.projector_type\" \"eagle\" (sprig knows "
              "\"domino\", or none for a plain draft)");
  }
  DominoHeadConfig head = small_head();
  head.pure_draft_prefix_len = 3;  // with shift_label, slot 3 is the last of 4
  o.head = domino_head(head);
  EXPECT_NO_THROW(draft_config_for(target_config(), o));
  head.shift_label = false;  // now the first corrected slot would be 4
  o.head = domino_head(head);
  EXPECT_EQ(testing::invalid_argument_message([&] { draft_config_for(target_config(), o); }),
            "[draft] pure_draft_prefix_len 3 leaves no slot of a block of 4 to correct (without "
            "shift_label slot 0 is the anchor)");
  // A recipe refuses a draft of another kind.
  const DraftConfig plain = draft_config_for(target_config(), options());
  EXPECT_EQ(testing::invalid_argument_message(
                [&] { check_draft_kind(plain, domino_kind(), "draft.init d"); }),
            "[draft] draft.init d is a dflash draft: a Domino recipe needs "
            "dflash_config.projector_type domino (prefix_gru and embed_proj)");
  EXPECT_NO_THROW(check_draft_kind(plain, dflash_kind(), "d"));
}

// A config saved by the reference's JetSpec recipe: dflash_config.causal true, yet the top-level
// is_causal false it stamps on every draft of the family.
TEST(DraftConfig, CausalityFollowsDflashConfigAndDisagreementsAreReported) {
  DraftOptions o = options();
  o.causal = true;
  nlohmann::json j = draft_config_for(target_config(), o).to_json(DType::f32);
  j["architectures"] = {"Qwen3DFlashDraftModel"};
  j["is_causal"] = false;
  j["dflash_config"].erase("causal_head");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(DraftConfig::from_json(j, "ref/config.json").kind().name(), "jetspec");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "ref/config.json: warning: dflash_config.causal is true but the top-level is_causal "
            "is false; loading the draft as in-block causal, as dflash_config.causal says. vLLM "
            "reads is_causal first and would serve it bidirectional: re-export it with `sprig "
            "convert --to-hf` to write both keys alike\n");
  // Without dflash_config.causal the top-level key decides, and then causal_head.
  j["dflash_config"].erase("causal");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(DraftConfig::from_json(j, "c").kind().name(), "dflash");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  j.erase("is_causal");
  j["dflash_config"]["causal_head"] = true;
  EXPECT_EQ(DraftConfig::from_json(j, "c").kind().name(), "jetspec");
  // causal_head (what JetSpec's engine reads) against the key that decides: reported.
  j["dflash_config"]["causal"] = false;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(DraftConfig::from_json(j, "c").kind().name(), "dflash");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "c: warning: dflash_config.causal_head is true but the draft loads as bidirectional; "
            "JetSpec's engine reads causal_head and would serve it in-block causal\n");
  j["dflash_config"].erase("causal");
  // Every key agrees in sprig's own exports: nothing to report.
  ::testing::internal::CaptureStderr();
  DraftConfig::from_json(draft_config_for(target_config(), o).to_json(DType::f32), "c");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  j["dflash_config"]["causal"] = "yes";
  EXPECT_EQ(testing::runtime_error_message([&] { DraftConfig::from_json(j, "c"); }),
            "c: \"dflash_config.causal\" must be true or false, got \"yes\"");
}

TEST(DraftConfig, ContradictionsAndForeignArchitecturesAreRefused) {
  const nlohmann::json good = draft_config_for(target_config(), options()).to_json(DType::f32);
  const auto message = [](const nlohmann::json& j) {
    return testing::runtime_error_message([&] { DraftConfig::from_json(j, "d/config.json"); });
  };
  nlohmann::json j = good;
  j["block_size"] = 8;
  EXPECT_EQ(message(j),
            "d/config.json: dflash_config.block_size is 4 but the top-level block_size is 8: they "
            "must agree");
  j = good;
  j["mask_token_id"] = 3;
  EXPECT_EQ(message(j),
            "d/config.json: dflash_config.mask_token_id is 39 but the top-level mask_token_id is "
            "3: they must agree");
  j = good;
  j["architectures"] = {"LlamaForCausalLM"};
  EXPECT_EQ(message(j),
            "d/config.json: architectures [\"LlamaForCausalLM\"] names no DFlash-family draft "
            "class (DFlashDraftModel, Qwen3DFlashDraftModel or DominoDraftModel)");
  j["architectures"] = {"Qwen3DFlash2DraftModel"};
  EXPECT_EQ(message(j),
            "d/config.json: architectures [\"Qwen3DFlash2DraftModel\"] is a DFlash 2 draft "
            "(convolution taps around each sublayer), which sprig does not support");
  for (const char* name : {"DFlashDraftModel", "Qwen3DFlashDraftModel", "DominoDraftModel"}) {
    j["architectures"] = {name};
    EXPECT_NO_THROW(DraftConfig::from_json(j, "c")) << name;
  }
  j = good;
  j["max_position_embeddings"] = 3;  // a block of 4 slots needs 4 positions
  EXPECT_EQ(message(j),
            "d/config.json: [draft] block_size 4 is more than max_position_embeddings 3");
  DraftOptions o = options();
  o.head = domino_head(small_head());
  j = draft_config_for(target_config(), o).to_json(DType::f32);
  j["emb_dim"] = 7;
  EXPECT_EQ(message(j),
            "d/config.json: dflash_config.emb_dim is 6 but the top-level emb_dim is 7: they must "
            "agree");
}

// What each engine gets: refusals with the way out, the head dropped on request, the reference's
// architecture name, and the launch lines.
TEST(ServingExport, PerEngineLayoutsRefusalsAndLaunchLines) {
  DraftOptions o = options();
  o.head = domino_head(small_head());
  const DraftConfig domino = draft_config_for(target_config(), o);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              exported_config(domino, {ServingEngine::vllm, false});
            }),
            "[serve] vLLM has no Domino runtime: its DFlash loader rejects the correction head's "
            "tensors (prefix_gru, embed_proj); its head cannot be dropped (trained with "
            "shift_label, every slot would be read one position off): export with --serve "
            "sglang");
  EXPECT_EQ(testing::invalid_argument_message([&] {
              exported_config(domino, {ServingEngine::vllm, true});
            }),
            "[serve] --drop-correction-head: this Domino draft was trained with shift_label (slot "
            "k predicts the token at anchor + 1 + k, one further than a DFlash draft's slot), so "
            "an engine's dflash method would read every draft one position off; only a draft "
            "trained without shift_label can drop its head");
  DraftOptions unshifted = o;
  DominoHeadConfig unshifted_head = small_head();
  unshifted_head.shift_label = false;
  unshifted.head = domino_head(unshifted_head);
  EXPECT_EQ(
      testing::invalid_argument_message([&] {
        exported_config(draft_config_for(target_config(), unshifted), {ServingEngine::vllm, false});
      }),
      "[serve] vLLM has no Domino runtime: its DFlash loader rejects the correction head's "
      "tensors (prefix_gru, embed_proj); add --drop-correction-head to write the DFlash "
      "part alone (decoding then uses the base logits; `sprig spec-eval` shows tau with and "
      "without the head), or export with --serve sglang");
  const DraftConfig dropped =
      exported_config(draft_config_for(target_config(), unshifted), {ServingEngine::vllm, true});
  EXPECT_EQ(dropped.kind().name(), "dflash");
  const nlohmann::json dj = serving_config(dropped, DType::bf16, ServingEngine::vllm);
  EXPECT_FALSE(dj["dflash_config"].contains("projector_type"));
  EXPECT_FALSE(dj.contains("emb_dim"));
  EXPECT_EQ(launch_lines(dropped, "/d", "Qwen/Qwen3-8B", ServingEngine::vllm),
            std::vector<std::string>{
                "vllm serve Qwen/Qwen3-8B --speculative-config "
                "'{\"method\":\"dflash\",\"model\":\"/d\",\"num_speculative_tokens\":3}'"});
  EXPECT_EQ(launch_lines(domino, "/d", "T", ServingEngine::portable),
            std::vector<std::string>{
                "python3 -m sglang.launch_server --model-path T --speculative-algorithm DFLASH "
                "--speculative-draft-model-path /d --speculative-num-draft-tokens 4"});
  DominoHeadConfig p2_head = small_head();
  p2_head.pure_draft_prefix_len = 2;
  o.head = domino_head(p2_head);
  const DraftConfig p2 = draft_config_for(target_config(), o);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              exported_config(p2, {ServingEngine::sglang, false});
            }),
            "[serve] SGLang serves a Domino head only with pure_draft_prefix_len 1; this draft "
            "has 2; its head cannot be dropped (trained with shift_label, every slot would be read "
            "one position off): export with --serve reference");
  unshifted_head.pure_draft_prefix_len = 2;
  unshifted.head = domino_head(unshifted_head);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              exported_config(draft_config_for(target_config(), unshifted),
                              {ServingEngine::sglang, false});
            }),
            "[serve] SGLang serves a Domino head only with pure_draft_prefix_len 1; this draft "
            "has 2; add --drop-correction-head to write the DFlash part alone (decoding then uses "
            "the base logits; `sprig spec-eval` shows tau with and without the head), or export "
            "with --serve reference");
  EXPECT_TRUE(launch_lines(p2, "/d", "T", ServingEngine::portable).empty());
  o = options();
  o.causal = true;
  const DraftConfig jet = draft_config_for(target_config(), o);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              exported_config(jet, {ServingEngine::sglang, false});
            }),
            "[serve] SGLang's DFLASH worker drafts blocks bidirectionally and has no in-block "
            "causal attention, so it would serve this JetSpec draft as a DFlash one: export with "
            "--serve vllm");
  EXPECT_EQ(launch_lines(jet, "/d", "T", ServingEngine::portable).size(), 1u);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              exported_config(jet, {ServingEngine::vllm, true});
            }),
            "[serve] --drop-correction-head: this is a jetspec draft; only a Domino draft has a "
            "correction head");
  const nlohmann::json ref = serving_config(jet, DType::f32, ServingEngine::reference);
  EXPECT_EQ(ref["architectures"], nlohmann::json({"Qwen3DFlashDraftModel"}));
  EXPECT_EQ(ref["is_causal"], true);
  EXPECT_EQ(DraftConfig::from_json(ref, "c").kind().name(), "jetspec");
  EXPECT_THROW(serving_engine_from_name("tgi"), std::invalid_argument);
}

TEST(DraftFiles, ADroppedHeadLeavesTheDFlashPartBitForBit) {
  testing::NamedTempDir tmp("draft_dropped_head");
  Generator gen(4);
  DraftOptions o = options();
  DominoHeadConfig head = small_head();
  head.shift_label = false;
  o.head = domino_head(head);
  DFlashDraft draft(draft_config_for(target_config(), o), gen);
  const SavedDraft saved =
      save_draft(draft, tmp.path + "/d", DType::f32, {}, false, {ServingEngine::vllm, true});
  EXPECT_EQ(saved.tensors, static_cast<int64_t>(draft.named_parameters().size()) - 4);
  const auto back = load_draft(tmp.path + "/d");
  EXPECT_EQ(back->config().kind().name(), "dflash");
  const auto b = back->state_dict();
  for (const auto& [name, t] : draft.state_dict()) {
    if (!b.count(name)) continue;
    EXPECT_EQ(testing::max_abs_diff(t, b.at(name)), 0.0) << name;
  }
  EXPECT_EQ(b.size(), draft.state_dict().size() - 4);
}

TEST(DraftFiles, DominoHeadUnderItsServingNames) {
  testing::NamedTempDir tmp("draft_domino_files");
  Generator gen(4);
  DraftOptions o = options();
  o.head = domino_head(small_head());
  DFlashDraft draft(draft_config_for(target_config(), o), gen);
  const auto params = draft.named_parameters();
  const auto shape = [&](const std::string& name) {
    for (const auto& [n, p] : params)
      if (n == name) return p.shape();
    return Shape{};
  };
  EXPECT_EQ(shape("prefix_gru.weight_ih_l0"), (Shape{15, 16}));  // [3G, H]
  EXPECT_EQ(shape("prefix_gru.weight_hh_l0"), (Shape{15, 5}));   // [3G, G]
  EXPECT_EQ(shape("embed_proj.0.weight"), (Shape{6, 21}));       // [E, H + G]
  EXPECT_EQ(shape("embed_proj.2.weight"), (Shape{40, 6}));       // [V, E]
  save_draft(draft, tmp.path + "/d", DType::f32);
  const auto back = load_draft(tmp.path + "/d");
  EXPECT_EQ(back->config().kind().name(), "domino");
  const auto a = draft.state_dict(), b = back->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_EQ(testing::max_abs_diff(t, b.at(name)), 0.0) << name;
}

TEST(DraftFiles, SavedAndLoadedBitForBit) {
  testing::NamedTempDir tmp("draft_files");
  Generator gen(4);
  DFlashDraft draft(draft_config_for(target_config(), options()), gen);
  // Serving names: no model. prefix, no embedding or head.
  std::vector<std::string> names;
  for (const auto& [name, p] : draft.named_parameters()) names.push_back(name);
  EXPECT_EQ(names.front(), "fc.weight");
  EXPECT_EQ(names[1], "hidden_norm.weight");
  EXPECT_EQ(names.back(), "norm.weight");
  EXPECT_NE(std::find(names.begin(), names.end(), "layers.1.self_attn.k_norm.weight"), names.end());
  EXPECT_EQ(draft.fc.weight.shape(), (Shape{16, 32}));

  save_draft(draft, tmp.path + "/f32", DType::f32);
  EXPECT_TRUE(is_draft_dir(tmp.path + "/f32"));
  const auto back = load_draft(tmp.path + "/f32");
  const auto a = draft.state_dict(), b = back->state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_EQ(testing::max_abs_diff(t, b.at(name)), 0.0) << name;

  save_draft(draft, tmp.path + "/bf16", DType::bf16);
  const SafetensorsFile f(tmp.path + "/bf16/model.safetensors");
  for (const StTensorInfo& t : f.tensors()) EXPECT_EQ(t.dtype, StDType::BF16) << t.name;
  // A directory with something in it is never replaced.
  EXPECT_THROW(save_draft(draft, tmp.path + "/f32", DType::f32), std::runtime_error);
  EXPECT_TRUE(fs::exists(tmp.path + "/f32/model.safetensors"));
}

TEST(DraftFiles, MismatchedWeightsAreRefused) {
  testing::NamedTempDir tmp("draft_bad_files");
  Generator gen(4);
  DFlashDraft draft(draft_config_for(target_config(), options()), gen);
  save_draft(draft, tmp.path + "/d", DType::f32);
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, p] : draft.named_parameters())
    if (name != "norm.weight") entries.push_back({name, p.value()});
  entries.push_back({"lm_head.weight", Tensor::zeros({40, 16})});
  save_safetensors(tmp.path + "/d/model.safetensors", entries);
  try {
    load_draft(tmp.path + "/d");
    FAIL() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), tmp.path +
                                         "/d: the draft's weights do not match its "
                                         "config.json: missing norm.weight; unexpected "
                                         "lm_head.weight");
  }
}

}  // namespace
}  // namespace sprig::speculative
