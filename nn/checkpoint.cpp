#include "nn/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tensor/input_file.h"
#include "tensor/json_text.h"
#include "tensor/storage.h"

namespace sprig {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string model_config_path(const std::string& dir) {
  if (!fs::exists(dir)) throw std::runtime_error(dir + " does not exist: give a model directory");
  if (!fs::is_directory(dir))
    throw std::runtime_error(
        dir + " is a file, not a model directory" +
        (fs::path(dir).filename() == "config.json" ? ": give the directory that holds it" : ""));
  const fs::path config = fs::path(dir) / "config.json";
  if (!fs::exists(config))
    throw std::runtime_error(dir + " has no config.json: it is not a model directory");
  return config.string();
}

std::map<std::string, Shape> expected_tensor_shapes(const QwenConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const int64_t q = c.num_attention_heads * D, kv = c.num_key_value_heads * D;
  std::map<std::string, Shape> s;
  s["model.embed_tokens.weight"] = {V, H};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    s[p + "input_layernorm.weight"] = {H};
    s[p + "post_attention_layernorm.weight"] = {H};
    s[p + "self_attn.q_proj.weight"] = {q, H};
    s[p + "self_attn.k_proj.weight"] = {kv, H};
    s[p + "self_attn.v_proj.weight"] = {kv, H};
    s[p + "self_attn.o_proj.weight"] = {H, q};
    if (c.has_qkv_bias()) {
      s[p + "self_attn.q_proj.bias"] = {q};
      s[p + "self_attn.k_proj.bias"] = {kv};
      s[p + "self_attn.v_proj.bias"] = {kv};
    }
    if (c.has_o_bias()) s[p + "self_attn.o_proj.bias"] = {H};
    if (c.has_qk_norm()) {
      s[p + "self_attn.q_norm.weight"] = {D};
      s[p + "self_attn.k_norm.weight"] = {D};
    }
    s[p + "mlp.gate_proj.weight"] = {I, H};
    s[p + "mlp.up_proj.weight"] = {I, H};
    s[p + "mlp.down_proj.weight"] = {H, I};
  }
  s["model.norm.weight"] = {H};
  if (!c.tie_word_embeddings) s["lm_head.weight"] = {V, H};
  return s;
}

// ---- reading ----------------------------------------------------------------------------------

namespace {

// A shard named by an index must be a file inside the checkpoint directory: a relative path
// without "..", which (through any symlink) resolves inside `dir`. Checked before anything opens.
void check_shard_name(const std::string& shard, const std::string& dir, const std::string& index) {
  const fs::path p(shard);
  const auto fail = [&](const std::string& why) {
    throw std::runtime_error(index + ": the shard \"" + shard + "\" " + why +
                             ": shards must be files inside " + dir);
  };
  if (shard.empty()) fail("is empty");
  if (p.is_absolute()) fail("is an absolute path");
  for (const fs::path& part : p)
    if (part == "..") fail("climbs out with \"..\"");
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::path(dir) / p, ec);
  const fs::path root = fs::weakly_canonical(dir, ec);
  if (ec) fail("cannot be resolved (" + ec.message() + ")");
  const auto [end, unused] =
      std::mismatch(root.begin(), root.end(), resolved.begin(), resolved.end());
  if (end != root.end()) fail("resolves to " + resolved.string() + ", outside the directory");
}

}  // namespace

WeightFiles::WeightFiles(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::vector<std::string> paths;
  // Both: which one holds the model is a guess (a stale single file beside new shards, or the
  // reverse), so neither is read.
  if (fs::exists(index) && fs::exists(single))
    throw std::runtime_error(dir +
                             " holds both model.safetensors and model.safetensors.index.json: "
                             "which is the model is ambiguous; remove the stale one");
  if (fs::exists(index)) {
    check_input_file(index.string(), "a shard index");
    const json j = read_json_file(index.string());
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw std::runtime_error(index.string() + ": has no \"weight_map\" object");
    std::map<std::string, std::string> shard_of;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string())
        throw std::runtime_error(index.string() + ": weight_map entry for \"" + name +
                                 "\" is not a file name");
      shard_of[name] = file.get<std::string>();
      check_shard_name(shard_of[name], dir, index.string());
      if (std::find(paths.begin(), paths.end(), shard_of[name]) == paths.end())
        paths.push_back(shard_of[name]);
    }
    for (const std::string& p : paths)
      files_.push_back(std::make_unique<SafetensorsFile>((fs::path(dir) / p).string()));
    for (const auto& f : files_)
      for (const StTensorInfo& t : f->tensors()) {
        auto it = shard_of.find(t.name);
        if (it == shard_of.end() || (fs::path(dir) / it->second).string() != f->path())
          throw std::runtime_error(f->path() + ": tensor \"" + t.name +
                                   "\" is not mapped to this shard by " + index.string());
        by_name_[t.name] = f.get();
      }
    for (const auto& [name, file] : shard_of)
      if (!by_name_.count(name))
        throw std::runtime_error(index.string() + ": \"" + name + "\" is not in its shard " + file);
  } else if (fs::exists(single)) {
    files_.push_back(std::make_unique<SafetensorsFile>(single.string()));
    for (const StTensorInfo& t : files_[0]->tensors()) by_name_[t.name] = files_[0].get();
  } else {
    throw std::runtime_error(dir +
                             ": has neither model.safetensors nor "
                             "model.safetensors.index.json");
  }
}

std::vector<std::string> WeightFiles::names() const {
  std::vector<std::string> out;
  for (const auto& [name, f] : by_name_) out.push_back(name);
  return out;
}

const SafetensorsFile& WeightFiles::file_of(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) throw std::runtime_error("no tensor named \"" + name + "\"");
  return *it->second;
}

Tensor WeightFiles::load(const std::string& name, Device device) const {
  const SafetensorsFile& file = file_of(name);
  Tensor t = file.load(name);
  // NaN or inf in a weight poisons every output (a loss of null) without any other sign.
  const Tensor values = t.to(Device::cpu(), DType::f32).contiguous();
  const float* v = values.data<float>();
  int64_t bad = 0;
  for (int64_t i = 0; i < values.numel(); ++i) bad += !std::isfinite(v[i]);
  if (bad > 0)
    throw std::runtime_error(file.path() + ": tensor \"" + name + "\" holds " +
                             std::to_string(bad) + " non-finite values (NaN or inf) of " +
                             std::to_string(values.numel()) + ": the checkpoint is corrupt");
  return t.to(device);
}

void check_tensors(const WeightFiles& weights, const std::map<std::string, Shape>& expected,
                   const std::string& what, const std::vector<std::string>& optional) {
  std::string missing, unexpected, mis_shaped, mis_typed;
  for (const auto& [name, shape] : expected) {
    if (!weights.contains(name)) {
      missing += " " + name;
      continue;
    }
    const StTensorInfo& got = weights.file_of(name).info(name);
    if (got.shape != shape)
      mis_shaped +=
          " " + name + " (expected " + shape_str(shape) + ", got " + shape_str(got.shape) + ")";
    if (got.dtype != StDType::F32 && got.dtype != StDType::BF16 && got.dtype != StDType::F16 &&
        got.dtype != StDType::F64)
      mis_typed += " " + name + " (" + st_dtype_name(got.dtype) + ")";
  }
  for (const std::string& name : weights.names())
    if (!expected.count(name) &&
        std::find(optional.begin(), optional.end(), name) == optional.end())
      unexpected += " " + name;
  if (missing.empty() && unexpected.empty() && mis_shaped.empty() && mis_typed.empty()) return;
  std::string msg = what + ":";
  if (!missing.empty()) msg += " missing" + missing + ";";
  if (!unexpected.empty()) msg += " unexpected" + unexpected + ";";
  if (!mis_shaped.empty()) msg += " wrong shape" + mis_shaped + ";";
  if (!mis_typed.empty())
    msg += " wrong dtype" + mis_typed + ", weights are F32, BF16, F16 or F64;";
  msg.pop_back();
  throw std::runtime_error(msg);
}

void check_weights(const WeightFiles& weights, const QwenConfig& config, const std::string& dir) {
  check_tensors(weights, expected_tensor_shapes(config),
                dir + ": the weights do not match config.json",
                config.tie_word_embeddings ? std::vector<std::string>{"lm_head.weight"}
                                           : std::vector<std::string>{});
}

DType stored_dtype(const WeightFiles& weights, const std::string& tensor) {
  return to_dtype(weights.file_of(tensor).info(tensor).dtype);
}

void warn_on_dtype_mismatch(const WeightFiles& weights, const QwenConfig& config,
                            const std::string& dir, const std::string& tensor) {
  const DType stored = stored_dtype(weights, tensor);
  // f64 weights (read as f32) have no model dtype to declare.
  if (config.dtype_declared && config.dtype != stored && stored != DType::f64)
    std::cerr << "sprig: [checkpoint] warning: " << dir << "/config.json declares dtype "
              << torch_dtype_name(config.dtype) << ", but its weights are "
              << torch_dtype_name(stored) << ": they are read as stored, and an export says "
              << torch_dtype_name(stored) << "\n";
}

std::unique_ptr<QwenForCausalLM> load_qwen(const std::string& dir) {
  QwenConfig config = QwenConfig::load(model_config_path(dir));
  WeightFiles weights(dir);
  check_weights(weights, config, dir);
  warn_on_dtype_mismatch(weights, config, dir);
  Generator gen(0);
  auto model = std::make_unique<QwenForCausalLM>(config, gen);
  std::map<std::string, Tensor> state;
  for (const auto& [name, shape] : expected_tensor_shapes(config)) state[name] = weights.load(name);
  model->load_state_dict(state);
  return model;
}

// ---- writing ----------------------------------------------------------------------------------

const std::vector<std::string> kTokenizerFiles = {
    "tokenizer.json",      "tokenizer_config.json",   "vocab.json",
    "merges.txt",          "special_tokens_map.json", "added_tokens.json",
    "chat_template.jinja", "chat_template.json"};

const std::vector<std::string> kCompanionFiles = [] {
  std::vector<std::string> names = kTokenizerFiles;
  names.push_back("generation_config.json");
  return names;
}();

std::vector<std::string> copy_companion_files(const std::string& from, const std::string& to) {
  std::vector<std::string> copied;
  for (const std::string& name : kCompanionFiles)
    if (fs::is_regular_file(fs::path(from) / name)) {
      fs::copy_file(fs::path(from) / name, fs::path(to) / name);
      copied.push_back(name);
    }
  return copied;
}

namespace {

// config.json, and nothing but regular files a model directory holds: weights (single, shards,
// index), generation_config.json, tokenizer files.
bool is_checkpoint_dir(const fs::path& dir) {
  if (!fs::is_regular_file(dir / "config.json")) return false;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool known = name == "config.json" || name == "model.safetensors.index.json" ||
                       (name.rfind("model", 0) == 0 && e.path().extension() == ".safetensors") ||
                       std::count(kCompanionFiles.begin(), kCompanionFiles.end(), name) > 0;
    if (!known || !e.is_regular_file() || e.is_symlink()) return false;
  }
  return true;
}

void write_config(const fs::path& dir, const QwenConfig& config) {
  std::ofstream out(dir / "config.json");
  out << config.to_json().dump(2) << "\n";
  if (!out) throw std::runtime_error((dir / "config.json").string() + ": write failed");
}

// A checkpoint directory whose model.safetensors records "checkpoint" as its writer.
std::string refuses_checkpoint_dir(const fs::path& existing, const OutputKind& kind) {
  if (!is_checkpoint_dir(existing))
    return "is not a " + std::string(kind.name) + " that sprig wrote";
  return refuses_metadata(safetensors_metadata((existing / "model.safetensors").string()), kind);
}

}  // namespace

const OutputKind kCheckpointDirOutput{"checkpoint directory", "checkpoint", true,
                                      refuses_checkpoint_dir};

void save_qwen(const QwenForCausalLM& model, const std::string& dir, bool overwrite) {
  Output out(dir, kCheckpointDirOutput, overwrite);
  QwenConfig config = model.config();
  config.dtype = model.head_weight().dtype();  // what the weights are, as they are written
  write_config(out.temp(), config);
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, p] : model.named_parameters()) entries.push_back({name, p.value()});
  save_safetensors((fs::path(out.temp()) / "model.safetensors").string(), entries, out.metadata());
  out.commit();
}

ConvertedModel convert_checkpoint(const std::string& in_dir, const std::string& out_dir,
                                  bool overwrite, std::optional<DType> dtype) {
  Output out(out_dir, kCheckpointDirOutput, overwrite);
  QwenConfig config = QwenConfig::load(model_config_path(in_dir));
  const WeightFiles weights(in_dir);
  check_weights(weights, config, in_dir);
  warn_on_dtype_mismatch(weights, config, in_dir);
  const fs::path weights_path = fs::path(out.temp()) / "model.safetensors";
  const std::map<std::string, Shape> shapes = expected_tensor_shapes(config);
  // The embedding's dtype unless --dtype says otherwise; f64 weights are written as f32, the
  // widest model dtype. Tensors stored otherwise are cast, so the label holds for every one.
  const DType stored = stored_dtype(weights);
  config.dtype = dtype.value_or(stored == DType::f64 ? DType::f32 : stored);
  bool uniform = true;
  for (const auto& [name, shape] : shapes)
    uniform = uniform && to_dtype(weights.file_of(name).info(name).dtype) == config.dtype;
  if (!uniform) {
    // Every tensor cast in memory, then written: refused up front when that cannot fit.
    double bytes = 0;
    for (const auto& [name, shape] : shapes)
      bytes +=
          static_cast<double>(shape_numel(shape)) * static_cast<double>(dtype_size(config.dtype));
    const double available = static_cast<double>(cpu_memory_available());
    if (bytes > available / 2) {
      char sizes[96];
      std::snprintf(sizes, sizeof sizes, "%.1f GiB in memory, over half the %.1f GiB",
                    bytes / (1 << 30), available / (1 << 30));
      throw std::runtime_error("[convert] the " + std::string(dtype_name(config.dtype)) +
                               " weights would take " + sizes + " available");
    }
    std::vector<SafetensorsEntry> entries;
    for (const auto& [name, shape] : shapes)
      entries.push_back({name, weights.load(name).to(Device::cpu(), config.dtype)});
    save_safetensors(weights_path.string(), entries, out.metadata());
  } else {
    std::vector<RawTensor> raw;
    for (const auto& [name, shape] : shapes) {
      const SafetensorsFile& f = weights.file_of(name);
      const StTensorInfo& info = f.info(name);
      raw.push_back({name, info.dtype, info.shape, f.raw(name), info.end - info.begin});
    }
    save_safetensors_raw(weights_path.string(), raw, out.metadata());
  }
  write_config(out.temp(), config);
  ConvertedModel converted{config.dtype, copy_companion_files(in_dir, out.temp())};
  out.commit();
  return converted;
}

}  // namespace sprig
