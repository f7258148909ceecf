// Checkpoint conversion with the real converter: HF (single file or sharded) -> sprig -> HF keeps
// every tensor bit for bit and a config.json that parses to the same QwenConfig; mismatched weights
// are all listed in one error and nothing is written; broken files fail with one sentence.
#include "nn/checkpoint.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/nn/checkpoint_fixtures.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::fs::exists;

// The message of the std::runtime_error that converting throws, or "" when it converts.
std::string convert_error(const std::string& in, const std::string& out) {
  try {
    convert_checkpoint(in, out);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

void expect_same_config(const QwenConfig& a, const QwenConfig& b) {
  EXPECT_EQ(a.model_type, b.model_type);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope.theta, b.rope.theta);
  EXPECT_EQ(a.initializer_range, b.initializer_range);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.sliding_window_per_layer, b.sliding_window_per_layer);
  EXPECT_EQ(a.dtype, b.dtype);
}

TEST(Checkpoint, ExpectedShapesFollowTheConfig) {
  // Qwen3 with heads * head_dim (64) != hidden (48), GQA 4:2, untied.
  const QwenConfig c = QwenConfig::from_json({{"model_type", "qwen3"},
                                              {"vocab_size", 96},
                                              {"hidden_size", 48},
                                              {"intermediate_size", 80},
                                              {"num_hidden_layers", 2},
                                              {"num_attention_heads", 4},
                                              {"num_key_value_heads", 2},
                                              {"head_dim", 16}});
  const auto shapes = expected_tensor_shapes(c);
  EXPECT_EQ(shapes.size(), 1 + 2 * 11 + 1 + 1u);  // embed, 11 per layer, norm, lm_head
  EXPECT_EQ(shapes.at("model.layers.1.self_attn.q_proj.weight"), (Shape{64, 48}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.k_proj.weight"), (Shape{32, 48}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.o_proj.weight"), (Shape{48, 64}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.k_norm.weight"), (Shape{16}));
  EXPECT_EQ(shapes.at("model.layers.1.mlp.down_proj.weight"), (Shape{48, 80}));
  EXPECT_EQ(shapes.at("lm_head.weight"), (Shape{96, 48}));
  // Qwen2, tied: q/k/v biases, no q/k norms, no lm_head.
  const QwenConfig tied = QwenConfig::from_json({{"model_type", "qwen2"},
                                                 {"vocab_size", 80},
                                                 {"hidden_size", 32},
                                                 {"intermediate_size", 64},
                                                 {"num_hidden_layers", 1},
                                                 {"num_attention_heads", 4},
                                                 {"num_key_value_heads", 2},
                                                 {"tie_word_embeddings", true}});
  const auto tied_shapes = expected_tensor_shapes(tied);
  EXPECT_EQ(tied_shapes.size(), 1 + 12 + 1u);  // embed, 12 per layer, norm
  EXPECT_EQ(tied_shapes.at("model.layers.0.self_attn.v_proj.bias"), (Shape{16}));
  EXPECT_FALSE(tied_shapes.count("lm_head.weight"));
  EXPECT_FALSE(tied_shapes.count("model.layers.0.self_attn.q_norm.weight"));
}

TEST(Checkpoint, ConvertsGoldenModelsBitForBit) {
  const testing::NamedTempDir tmp("ckpt_golden");
  const std::string& root = tmp.path;
  for (const std::string model : {"qwen3_tiny", "qwen2_tiny"}) {
    const std::string golden = testing::kGoldenDir + model;
    convert_checkpoint(golden, root + "/" + model);
    testing::expect_same_tensors(golden + "/model.safetensors", root + "/" + model);
    EXPECT_EQ(testing::entries_of(root + "/" + model),
              (std::set<std::string>{"config.json", "model.safetensors"}));
    expect_same_config(QwenConfig::load(root + "/" + model + "/config.json"),
                       QwenConfig::load(golden + "/config.json"));
  }
  EXPECT_EQ(testing::entries_of(root), (std::set<std::string>{"qwen2_tiny", "qwen3_tiny"}));
}

TEST(Checkpoint, ConvertsShardedInput) {
  const testing::NamedTempDir tmp("ckpt_sharded");
  const std::string& root = tmp.path;
  testing::write_hf_checkpoint("qwen3_tiny", root + "/hf", {}, {}, /*shards=*/2);
  EXPECT_TRUE(exists(root + "/hf/model.safetensors.index.json"));
  EXPECT_FALSE(exists(root + "/hf/model.safetensors"));
  convert_checkpoint(root + "/hf", root + "/out");
  testing::expect_same_tensors(testing::kGoldenDir + "qwen3_tiny/model.safetensors", root + "/out");
  EXPECT_EQ(testing::entries_of(root + "/out"),
            (std::set<std::string>{"config.json", "model.safetensors"}));
  // The sharded layout loads to the same model as the single file.
  const auto sharded = load_qwen(root + "/hf");
  const auto single = load_qwen(testing::kGoldenDir + "qwen3_tiny");
  for (const auto& [name, t] : single->state_dict())
    EXPECT_EQ(testing::max_abs_diff(sharded->state_dict().at(name), t), 0.0) << name;
  // A single file beside the shards: which one is the model is a guess, so neither is read.
  testing::fs::copy_file(testing::kGoldenDir + "qwen3_tiny/model.safetensors",
                         root + "/hf/model.safetensors");
  EXPECT_EQ(convert_error(root + "/hf", root + "/both"),
            root +
                "/hf holds both model.safetensors and model.safetensors.index.json: which is "
                "the model is ambiguous; remove the stale one");
}

TEST(Checkpoint, ShardIndexMustMatchTheShards) {
  const testing::NamedTempDir tmp("ckpt_index");
  const std::string& root = tmp.path;
  testing::write_hf_checkpoint("qwen3_tiny", root + "/hf", {}, {}, 2);
  const std::string index_path = root + "/hf/model.safetensors.index.json";
  nlohmann::json index = nlohmann::json::parse(testing::read_text(index_path));
  index["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
  index["weight_map"]["model.ghost.weight"] = "model-00002-of-00002.safetensors";
  testing::write_text(index_path, index.dump());
  const std::string msg = convert_error(root + "/hf", root + "/out");
  EXPECT_NE(msg.find("is not mapped to this shard by " + index_path), std::string::npos) << msg;
  testing::write_text(index_path, "{\"weight_map\": 3}");
  EXPECT_EQ(convert_error(root + "/hf", root + "/out"),
            index_path + ": has no \"weight_map\" object");
  EXPECT_FALSE(exists(root + "/out"));
}

TEST(Checkpoint, ShardNamesMustStayInsideTheDirectory) {
  const testing::NamedTempDir tmp("ckpt_escape");
  const std::string& root = tmp.path;
  testing::write_hf_checkpoint("qwen3_tiny", root + "/hf", {}, {}, 2);
  const std::string index_path = root + "/hf/model.safetensors.index.json";
  const nlohmann::json good = nlohmann::json::parse(testing::read_text(index_path));
  // A real shard outside the directory, which the index must not be able to reach.
  testing::fs::copy_file(root + "/hf/model-00001-of-00002.safetensors",
                         root + "/outside.safetensors");
  testing::fs::create_symlink(root + "/outside.safetensors", root + "/hf/link.safetensors");
  const std::string suffix = ": shards must be files inside " + root + "/hf";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"../outside.safetensors", "climbs out with \"..\""},
      {"sub/../../outside.safetensors", "climbs out with \"..\""},
      {root + "/outside.safetensors", "is an absolute path"},
      {"link.safetensors", "resolves to " + root + "/outside.safetensors, outside the directory"},
      {"", "is empty"},
  };
  for (const auto& [shard, why] : cases) {
    nlohmann::json index = good;
    for (auto& [name, file] : index["weight_map"].items())
      if (file == "model-00001-of-00002.safetensors") file = shard;
    testing::write_text(index_path, index.dump());
    EXPECT_EQ(convert_error(root + "/hf", root + "/out"),
              index_path + ": the shard \"" + shard + "\" " + why + suffix);
  }
  EXPECT_FALSE(exists(root + "/out"));
}

TEST(Checkpoint, OutputsAreNewOrAnEarlierCheckpoint) {
  const testing::NamedTempDir tmp("ckpt_overwrite");
  const std::string& root = tmp.path;
  const std::string src = testing::kGoldenDir + "qwen3_tiny";
  convert_checkpoint(src, root + "/out");
  // --overwrite replaces an earlier checkpoint (here with tokenizer files beside it) whole.
  testing::write_text(root + "/out/tokenizer.json", "{}");
  convert_checkpoint(src, root + "/out", /*overwrite=*/true);
  EXPECT_EQ(testing::entries_of(root + "/out"),
            (std::set<std::string>{"config.json", "model.safetensors"}));
  // A directory holding anything else is refused even with --overwrite, and kept.
  testing::write_text(root + "/out/notes.txt", "mine");
  EXPECT_EQ(convert_error(src, root + "/out"),
            "[--out] " + root +
                "/out already exists and is not empty: choose a new directory, or give "
                "--overwrite to replace it");
  try {
    convert_checkpoint(src, root + "/out", true);
    ADD_FAILURE() << "replaced a directory with a user's file";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "[--out] " + root +
                                         "/out is not a checkpoint directory that sprig wrote: "
                                         "refusing to replace it, even with --overwrite");
  }
  EXPECT_EQ(testing::read_text(root + "/out/notes.txt"), "mine");
  // A file is never replaced by a directory; a model directory given as its config.json is named.
  testing::write_text(root + "/file", "mine");
  EXPECT_EQ(convert_error(src, root + "/file"),
            "[--out] " + root + "/file is a file, not a directory: choose a directory");
  EXPECT_EQ(
      convert_error(src + "/config.json", root + "/new"),
      src + "/config.json is a file, not a model directory: give the directory that holds it");
  EXPECT_EQ(testing::read_text(root + "/file"), "mine");
}

TEST(Checkpoint, ListsEveryMismatchAndWritesNothing) {
  const testing::NamedTempDir tmp("ckpt_mismatch");
  const std::string& root = tmp.path;
  testing::write_hf_checkpoint("qwen3_tiny", root + "/hf", [](std::vector<RawTensor>& ts) {
    std::erase_if(ts, [](const RawTensor& t) {
      return t.name == "model.layers.0.mlp.down_proj.weight" || t.name == "model.norm.weight";
    });
    for (RawTensor& t : ts)
      if (t.name == "model.layers.1.self_attn.q_norm.weight") t.shape = {1, t.shape[0]};
    RawTensor extra = ts[0];
    extra.name = "model.layers.2.mlp.up_proj.weight";
    ts.push_back(extra);
  });
  const std::string d =
      std::to_string(QwenConfig::load(testing::kGoldenDir + "qwen3_tiny/config.json").head_dim);
  const std::string expected =
      root +
      "/hf: the weights do not match config.json: missing "
      "model.layers.0.mlp.down_proj.weight model.norm.weight; unexpected "
      "model.layers.2.mlp.up_proj.weight; wrong shape model.layers.1.self_attn.q_norm.weight "
      "(expected [" +
      d + "], got [1, " + d + "])";
  EXPECT_EQ(convert_error(root + "/hf", root + "/out"), expected);
  EXPECT_EQ(testing::entries_of(root), std::set<std::string>{"hf"});  // no out, no temporary

  // An existing output directory is refused before anything is read, and left as it was.
  testing::fs::create_directories(root + "/out");
  testing::write_text(root + "/out/keep.txt", "old");
  EXPECT_EQ(convert_error(root + "/hf", root + "/out"),
            "[--out] " + root +
                "/out already exists and is not empty: choose a new directory, or give "
                "--overwrite to replace it");
  EXPECT_EQ(testing::entries_of(root + "/out"), std::set<std::string>{"keep.txt"});
  EXPECT_EQ(testing::read_text(root + "/out/keep.txt"), "old");
  EXPECT_EQ(testing::entries_of(root), (std::set<std::string>{"hf", "out"}));
}

TEST(Checkpoint, TiedModelIgnoresRedundantHead) {
  const testing::NamedTempDir tmp("ckpt_tied");
  const std::string& root = tmp.path;
  testing::write_hf_checkpoint("qwen2_tiny", root + "/hf", [](std::vector<RawTensor>& ts) {
    for (const RawTensor& t : std::vector<RawTensor>(ts))
      if (t.name == "model.embed_tokens.weight") {
        RawTensor head = t;
        head.name = "lm_head.weight";
        ts.push_back(head);
      }
  });
  convert_checkpoint(root + "/hf", root + "/out");
  testing::expect_same_tensors(testing::kGoldenDir + "qwen2_tiny/model.safetensors", root + "/out");
}

TEST(Checkpoint, BrokenFilesFailWithOneSentence) {
  const testing::NamedTempDir tmp("ckpt_broken");
  const std::string& root = tmp.path;
  for (const std::string& kind : testing::breakage_kinds()) {
    const testing::BrokenCheckpoint broken = testing::broken_checkpoint(kind, root);
    const std::string msg = convert_error(broken.dir, root + "/out");
    EXPECT_EQ(msg.rfind(broken.message, 0), 0u) << kind << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << kind << ": " << msg;
    EXPECT_FALSE(exists(root + "/out")) << kind;
    EXPECT_THROW(load_qwen(broken.dir), std::runtime_error) << kind;
  }
}

// NaN or inf in a weight refuses the load, naming the file and the tensor.
TEST(Checkpoint, NonFiniteWeightsAreRefusedByName) {
  const testing::NamedTempDir tmp("ckpt_nonfinite");
  for (const float bad : {std::nanf(""), -INFINITY}) {
    std::vector<float> values;
    testing::write_hf_checkpoint("qwen3_tiny", tmp.path, [&](std::vector<RawTensor>& ts) {
      for (RawTensor& t : ts)
        if (t.name == "model.norm.weight") {
          values.assign(t.bytes / sizeof(float), 1.0f);
          values[3] = bad;
          t.data = reinterpret_cast<const uint8_t*>(values.data());
        }
    });
    try {
      load_qwen(tmp.path);
      FAIL() << "loaded";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()),
                tmp.path + "/model.safetensors: tensor \"model.norm.weight\" holds 1 non-finite " +
                    "values (NaN or inf) of " + std::to_string(values.size()) +
                    ": the checkpoint is corrupt");
    }
  }
}

TEST(Checkpoint, ExportToHfRoundTrips) {
  const testing::NamedTempDir tmp("ckpt_export");
  const std::string& root = tmp.path;
  const std::string golden = testing::kGoldenDir + "qwen3_tiny";
  convert_checkpoint(golden, root + "/sprig");
  convert_checkpoint(root + "/sprig", root + "/hf");
  testing::expect_same_tensors(golden + "/model.safetensors", root + "/hf");
  expect_same_config(QwenConfig::load(root + "/hf/config.json"),
                     QwenConfig::load(golden + "/config.json"));
  // What transformers' AutoConfig / from_pretrained need.
  const nlohmann::json config = nlohmann::json::parse(testing::read_text(root + "/hf/config.json"));
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"Qwen3ForCausalLM"}));
  EXPECT_EQ(config["model_type"], "qwen3");
  EXPECT_EQ(config["torch_dtype"], "float32");
  EXPECT_EQ(SafetensorsFile(root + "/hf/model.safetensors").metadata().at("format"), "pt");
}

TEST(Checkpoint, Bf16CheckpointKeepsItsBits) {
  const testing::NamedTempDir tmp("ckpt_bf16");
  const std::string& root = tmp.path;
  QwenConfig c = QwenConfig::load(testing::kGoldenDir + "qwen2_tiny/config.json");
  c.dtype = DType::bf16;
  c.raw.erase("torch_dtype");
  Generator gen(5);
  QwenForCausalLM model(c, gen);
  model.to(Device::cpu(), DType::bf16);
  save_qwen(model, root + "/saved");
  convert_checkpoint(root + "/saved", root + "/hf");
  testing::expect_same_tensors(root + "/saved/model.safetensors", root + "/hf");
  EXPECT_EQ(SafetensorsFile(root + "/hf/model.safetensors").info("model.norm.weight").dtype,
            StDType::BF16);
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(root + "/hf/config.json"))["torch_dtype"],
            "bfloat16");
  // Loading widens to f32 exactly.
  const auto loaded = load_qwen(root + "/hf");
  for (const auto& [name, p] : model.named_parameters())
    EXPECT_EQ(testing::max_abs_diff(loaded->state_dict().at(name), p.value()), 0.0) << name;
}

// Tokenizer and generation files travel with the weights both ways, byte for byte.
TEST(Checkpoint, ConversionsCarryTokenizerAndGenerationFiles) {
  const testing::NamedTempDir tmp("ckpt_companions");
  const std::string& root = tmp.path;
  testing::write_hf_checkpoint("qwen3_tiny", root + "/hf");
  // Every file of kCompanionFiles, each with its own text.
  std::map<std::string, std::string> files;
  for (const std::string& name : kCompanionFiles) files[name] = "{\"file\": \"" + name + "\"}\n";
  for (const auto& [name, text] : files) testing::write_text(root + "/hf/" + name, text);
  testing::write_text(root + "/hf/notes.txt", "not a model file\n");
  const ConvertedModel in = convert_checkpoint(root + "/hf", root + "/sprig");
  EXPECT_EQ(in.companion_files,
            (std::vector<std::string>{"tokenizer.json", "tokenizer_config.json", "vocab.json",
                                      "merges.txt", "special_tokens_map.json", "added_tokens.json",
                                      "chat_template.jinja", "chat_template.json",
                                      "generation_config.json"}));
  EXPECT_FALSE(exists(root + "/sprig/notes.txt"));
  EXPECT_EQ(in.dtype, DType::f32);
  const ConvertedModel back = convert_checkpoint(root + "/sprig", root + "/out");
  EXPECT_EQ(back.companion_files, in.companion_files);
  for (const auto& [name, text] : files) {
    EXPECT_EQ(testing::read_text(root + "/sprig/" + name), text) << name;
    EXPECT_EQ(testing::read_text(root + "/out/" + name), text) << name;
  }
  // A directory with them is still one sprig wrote, so --overwrite may replace it.
  EXPECT_NO_THROW(convert_checkpoint(root + "/hf", root + "/out", /*overwrite=*/true));
}

// A config that declares another dtype than its weights' is read as the weights are, says so once,
// and its export declares what the weights are.
TEST(Checkpoint, ADtypeTheWeightsDoNotHaveIsWarnedAndCorrected) {
  const testing::NamedTempDir tmp("ckpt_dtype_label");
  const std::string& root = tmp.path;
  testing::write_hf_checkpoint("qwen3_tiny", root + "/hf", {},
                               [](nlohmann::json& c) { c["torch_dtype"] = "bfloat16"; });
  ::testing::internal::CaptureStderr();
  const ConvertedModel converted = convert_checkpoint(root + "/hf", root + "/out");
  const std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(warning, "sprig: [checkpoint] warning: " + root +
                         "/hf/config.json declares dtype bfloat16, but its weights are float32: "
                         "they are read as stored, and an export says float32\n");
  EXPECT_EQ(converted.dtype, DType::f32);
  const nlohmann::json config =
      nlohmann::json::parse(testing::read_text(root + "/out/config.json"));
  EXPECT_EQ(config["torch_dtype"], "float32");
  EXPECT_EQ(config["dtype"], "float32");
  testing::expect_same_tensors(testing::kGoldenDir + "qwen3_tiny/model.safetensors", root + "/out");
  // The corrected export loads without a word.
  ::testing::internal::CaptureStderr();
  load_qwen(root + "/out");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

// A cast rounds every tensor to the asked dtype (round to nearest even) and labels it so; casting
// back widens exactly.
TEST(Checkpoint, ConvertCastsToTheAskedDtype) {
  const testing::NamedTempDir tmp("ckpt_cast");
  const std::string& root = tmp.path;
  const std::string golden = testing::kGoldenDir + "qwen3_tiny";
  const ConvertedModel half = convert_checkpoint(golden, root + "/bf16", false, DType::bf16);
  EXPECT_EQ(half.dtype, DType::bf16);
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(root + "/bf16/config.json"))["dtype"],
            "bfloat16");
  const SafetensorsFile source(golden + "/model.safetensors"),
      cast(root + "/bf16/model.safetensors");
  double rounding = 0;
  for (const StTensorInfo& t : source.tensors()) {
    ASSERT_EQ(cast.info(t.name).dtype, StDType::BF16) << t.name;
    const Tensor want = source.load(t.name).to(Device::cpu(), DType::bf16);
    EXPECT_EQ(testing::max_abs_diff(cast.load(t.name), want), 0.0) << t.name;
    rounding =
        std::max(rounding, testing::max_abs_diff(cast.load(t.name).to(Device::cpu(), DType::f32),
                                                 source.load(t.name)));
  }
  EXPECT_GT(rounding, 0.0);  // the cast rounded: it is not a relabelling
  convert_checkpoint(root + "/bf16", root + "/f32", false, DType::f32);
  const SafetensorsFile wide(root + "/f32/model.safetensors");
  for (const StTensorInfo& t : cast.tensors()) {
    ASSERT_EQ(wide.info(t.name).dtype, StDType::F32) << t.name;
    EXPECT_EQ(testing::max_abs_diff(wide.load(t.name), cast.load(t.name)), 0.0) << t.name;
  }
  const ConvertedModel f16 = convert_checkpoint(golden, root + "/f16", false, DType::f16);
  EXPECT_EQ(f16.dtype, DType::f16);
  EXPECT_EQ(nlohmann::json::parse(testing::read_text(root + "/f16/config.json"))["dtype"],
            "float16");
  const SafetensorsFile narrow(root + "/f16/model.safetensors");
  for (const StTensorInfo& t : source.tensors()) {
    ASSERT_EQ(narrow.info(t.name).dtype, StDType::F16) << t.name;
    EXPECT_EQ(testing::max_abs_diff(narrow.load(t.name),
                                    source.load(t.name).to(Device::cpu(), DType::f16)),
              0.0)
        << t.name;
  }
  // Asking for the stored dtype copies the bytes.
  convert_checkpoint(golden, root + "/same", false, DType::f32);
  testing::expect_same_tensors(golden + "/model.safetensors", root + "/same");
}

// Every tensor convert writes has the dtype its config says: f64 weights are written as f32, and a
// tensor stored in another dtype than the embedding's is cast to it.
TEST(Checkpoint, ConvertWritesEveryTensorInTheDtypeItsConfigSays) {
  const testing::NamedTempDir tmp("ckpt_label");
  const std::string golden = testing::kGoldenDir + "qwen3_tiny";
  const SafetensorsFile source(golden + "/model.safetensors");
  for (const std::string kind : {"f64", "mixed"}) {
    const std::string in = tmp.path + "/" + kind;
    testing::fs::create_directories(in);
    testing::fs::copy_file(golden + "/config.json", in + "/config.json");
    std::vector<SafetensorsEntry> entries;
    for (const StTensorInfo& t : source.tensors()) {
      const DType stored = kind == "f64"                   ? DType::f64
                           : t.name == "model.norm.weight" ? DType::bf16
                                                           : DType::f32;
      entries.push_back({t.name, source.load(t.name).to(Device::cpu(), stored)});
    }
    save_safetensors(in + "/model.safetensors", entries);
    EXPECT_EQ(convert_checkpoint(in, in + "_out", false, std::nullopt).dtype, DType::f32) << kind;
    EXPECT_EQ(nlohmann::json::parse(testing::read_text(in + "_out/config.json"))["dtype"],
              "float32");
    const SafetensorsFile written(in + "_out/model.safetensors");
    for (const StTensorInfo& t : written.tensors())
      EXPECT_EQ(t.dtype, StDType::F32) << kind << ": " << t.name;
  }
}

}  // namespace
}  // namespace sprig
