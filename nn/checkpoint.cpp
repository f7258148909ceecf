#include "nn/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace sprig {

namespace fs = std::filesystem;
using json = nlohmann::json;

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

WeightFiles::WeightFiles(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::vector<std::string> paths;
  if (fs::exists(index)) {
    std::ifstream in(index);
    json j;
    try {
      j = json::parse(in);
    } catch (const json::parse_error& e) {
      throw std::runtime_error(index.string() + ": is not valid JSON (" + e.what() + ")");
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      throw std::runtime_error(index.string() + ": has no \"weight_map\" object");
    std::map<std::string, std::string> shard_of;
    for (const auto& [name, file] : j["weight_map"].items()) {
      if (!file.is_string())
        throw std::runtime_error(index.string() + ": weight_map entry for \"" + name +
                                 "\" is not a file name");
      shard_of[name] = file.get<std::string>();
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
  return file_of(name).load(name, device);
}

void check_weights(const WeightFiles& weights, const QwenConfig& config, const std::string& dir) {
  const std::map<std::string, Shape> expected = expected_tensor_shapes(config);
  std::string missing, unexpected, mis_shaped;
  for (const auto& [name, shape] : expected) {
    if (!weights.contains(name)) {
      missing += " " + name;
      continue;
    }
    const Shape& got = weights.file_of(name).info(name).shape;
    if (got != shape)
      mis_shaped += " " + name + " (expected " + shape_str(shape) + ", got " + shape_str(got) + ")";
  }
  for (const std::string& name : weights.names())
    if (!expected.count(name) && !(config.tie_word_embeddings && name == "lm_head.weight"))
      unexpected += " " + name;
  if (missing.empty() && unexpected.empty() && mis_shaped.empty()) return;
  std::string msg = dir + ": the weights do not match config.json:";
  if (!missing.empty()) msg += " missing" + missing + ";";
  if (!unexpected.empty()) msg += " unexpected" + unexpected + ";";
  if (!mis_shaped.empty()) msg += " wrong shape" + mis_shaped + ";";
  msg.pop_back();
  throw std::runtime_error(msg);
}

std::unique_ptr<QwenForCausalLM> load_qwen(const std::string& dir) {
  QwenConfig config = QwenConfig::load((fs::path(dir) / "config.json").string());
  WeightFiles weights(dir);
  check_weights(weights, config, dir);
  Generator gen(0);
  auto model = std::make_unique<QwenForCausalLM>(config, gen);
  std::map<std::string, Tensor> state;
  for (const auto& [name, shape] : expected_tensor_shapes(config)) state[name] = weights.load(name);
  model->load_state_dict(state);
  return model;
}

// ---- writing ----------------------------------------------------------------------------------

void write_directory(const std::string& dir, const std::function<void(const fs::path&)>& fill,
                     bool replace) {
  const fs::path target = fs::absolute(dir);
  if (!replace && fs::exists(target) && !(fs::is_directory(target) && fs::is_empty(target)))
    throw std::runtime_error(dir +
                             " already exists and is not an empty directory: choose "
                             "another output directory");
  fs::create_directories(target.parent_path());
  const fs::path tmp = target.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    fill(tmp);
    if (fs::exists(target)) fs::remove_all(target);
    fs::rename(tmp, target);
  } catch (...) {
    fs::remove_all(tmp);
    throw;
  }
}

void check_new_file(const std::string& path) {
  const fs::path target = fs::absolute(path);
  if (fs::is_directory(target)) throw std::runtime_error(path + " is a directory, not a file");
  if (fs::exists(target) && fs::file_size(target) > 0)
    throw std::runtime_error(path + " already exists: choose another output file");
  if (!fs::is_directory(target.parent_path()))
    throw std::runtime_error(path + ": the directory " + target.parent_path().string() +
                             " does not exist");
}

void write_new_file(const std::string& path,
                    const std::function<void(const std::string& tmp)>& fill) {
  check_new_file(path);
  const std::string tmp = fs::absolute(path).string() + ".tmp-" + std::to_string(::getpid());
  try {
    fill(tmp);
    fs::rename(tmp, path);
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
}

namespace {

void write_config(const fs::path& dir, const QwenConfig& config) {
  std::ofstream out(dir / "config.json");
  out << config.to_json().dump(2) << "\n";
  if (!out) throw std::runtime_error((dir / "config.json").string() + ": write failed");
}

}  // namespace

void save_qwen(const QwenForCausalLM& model, const std::string& dir) {
  write_directory(
      dir,
      [&](const fs::path& tmp) {
        write_config(tmp, model.config());
        std::vector<SafetensorsEntry> entries;
        for (const auto& [name, p] : model.named_parameters()) entries.push_back({name, p.value()});
        save_safetensors((tmp / "model.safetensors").string(), entries);
      },
      /*replace=*/true);
}

void convert_checkpoint(const std::string& in_dir, const std::string& out_dir) {
  const QwenConfig config = QwenConfig::load((fs::path(in_dir) / "config.json").string());
  const WeightFiles weights(in_dir);
  check_weights(weights, config, in_dir);
  std::vector<RawTensor> raw;
  for (const auto& [name, shape] : expected_tensor_shapes(config)) {
    const SafetensorsFile& f = weights.file_of(name);
    const StTensorInfo& info = f.info(name);
    raw.push_back({name, info.dtype, info.shape, f.raw(name), info.end - info.begin});
  }
  write_directory(
      out_dir,
      [&](const fs::path& tmp) {
        write_config(tmp, config);
        save_safetensors_raw((tmp / "model.safetensors").string(), raw);
      },
      /*replace=*/true);
}

}  // namespace sprig
