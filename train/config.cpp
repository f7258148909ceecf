// The training config: a YAML file and its overrides read, checked once and resolved (absolute
// paths, every default written back), and the changes between two resolved configs
// (docs/semantics.md §11). The draft recipes' sections are read in train/draft_config.cpp.
#include "train/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <stdexcept>

#include "data/config.h"
#include "train/checkpoint.h"
#include "train/config_yaml.h"

namespace sprig {

using namespace config_yaml;

namespace {

// The valid keys of each section (the data section is checked by data/config.h).
const std::map<std::string, std::vector<std::string>>& schema() {
  static const std::map<std::string, std::vector<std::string>> s = {
      {"",
       {"run_dir", "seed", "device", "model", "target", "draft", "data", "loss", "train",
        "optimizer", "scheduler", "log", "checkpoint", "val", "attention"}},
      {"model", {"path", "config", "dtype"}},
      {"attention", {"backend"}},
      {"loss", {"type", "average", "clip_eps"}},
      {"target", {"path", "config"}},
      {"draft",
       {"mask_token_id",
        "num_layers",
        "block_size",
        "target_layer_ids",
        "num_anchors",
        "loss_type",
        "loss_decay_gamma",
        "prefix_weight_base",
        "sliding_window",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "dtype",
        "init",
        "emb_dim",
        "gru_hidden_dim",
        "pure_draft_prefix_len",
        "shift_label",
        "lambda_base_start",
        "lambda_base_decay_ratio",
        "kd_temperature",
        "kd_chunk_size",
        "aux_layer_ids",
        "ttt_steps",
        "vocab"}},
      {"train",
       {"max_steps", "num_epochs", "grad_accumulation_steps", "max_grad_norm", "loss_normalization",
        "max_consecutive_skips", "activation_checkpointing", "shard"}},
      {"optimizer", {"lr", "betas", "weight_decay", "eps"}},
      {"scheduler", {"warmup_ratio", "warmup_steps", "min_lr_ratio"}},
      {"log", {"every_steps"}},
      {"checkpoint", {"every_steps", "keep_last"}},
      {"val", {"every_steps"}},
  };
  return s;
}

// train.activation_checkpointing: none, layers or every_<n> (n >= 1) -> 0, 1 or n.
int64_t parse_activation_checkpointing(const std::string& v) {
  if (v == "none") return 0;
  if (v == "layers") return 1;
  const std::string digits = v.rfind("every_", 0) == 0 ? v.substr(6) : "";
  if (!digits.empty() && digits.size() <= 6 &&
      digits.find_first_not_of("0123456789") == std::string::npos && std::stoll(digits) >= 1)
    return std::stoll(digits);
  fail(
      "train.activation_checkpointing must be none, layers or every_<n> (n >= 1: every n-th "
      "layer), got '" +
      v + "'");
}

void check_section(const YAML::Node& node, const std::string& section) {
  if (!node.IsMap()) fail((section.empty() ? "the config" : section + ":") + " must be a mapping");
  const std::vector<std::string>& keys = schema().at(section);
  for (const auto& entry : node) {
    const std::string key = entry.first.as<std::string>();
    data::check_known_key(key, keys, section.empty() ? "" : section + ".");
  }
}

// Sets root[a][b]... = value for an override "a.b=value".
void apply_override(YAML::Node& root, const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0)
    fail("override '" + text + "' must look like section.key=value");
  const std::string path = text.substr(0, eq);
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    fail("override '" + text + "' has an unparsable value: " + e.msg);
  }
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  // yaml-cpp nodes are handles: walk down with a vector of them to assign in place.
  std::vector<YAML::Node> chain = {root};
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = chain.back()[parts[i]];
    if (!next.IsDefined() || next.IsNull())
      chain.back()[parts[i]] = YAML::Node(YAML::NodeType::Map);
    chain.push_back(chain.back()[parts[i]]);
  }
  chain.back()[parts.back()] = value;
}

// The keys that hold paths. A config file's resolve against the file's directory, a command
// line's against the current one: a config runs the same from anywhere, and the resolved config
// records them absolute.
void make_config_paths_absolute(YAML::Node& root, const std::filesystem::path& base) {
  static const std::pair<const char*, const char*> kPathKeys[] = {
      {"", "run_dir"},    {"model", "path"},    {"model", "config"},
      {"target", "path"}, {"target", "config"}, {"draft", "init"},
      {"draft", "vocab"}, {"data", "train"},    {"data", "val"}};
  for (const auto& [section, key] : kPathKeys) {
    YAML::Node holder = *section ? root[section] : root;
    if (holder.IsMap() && present(holder[key])) data::make_paths_absolute(holder[key], base);
  }
}

// A run directory given as model.path, target.path or draft.init stands for its newest checkpoint,
// which the resolved config records.
void follow_runs_to_their_latest(YAML::Node& root) {
  for (const auto& [section, key] :
       {std::pair{"model", "path"}, {"target", "path"}, {"draft", "init"}}) {
    YAML::Node holder = root[section];
    if (holder.IsMap() && holder[key].IsScalar())
      holder[key] = follow_latest(holder[key].as<std::string>());
  }
}

// Where `message` first names `key` or a key under it ("train.max_step" is not
// "train.max_steps"), or npos.
size_t where_named(const std::string& message, const std::string& key) {
  const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = message.find(key); at != std::string::npos; at = message.find(key, at + 1)) {
    const size_t end = at + key.size();
    if ((at == 0 || !(word(message[at - 1]) || message[at - 1] == '.')) &&
        (end == message.size() || !word(message[end])))
      return at;
  }
  return std::string::npos;
}

void parse_loss(YAML::Node& root, TrainConfig& c) {
  if (!present(root["loss"])) return;  // sft; left out of the resolved config as runs before it
  const std::string type = get<std::string>(root, "loss", "type", "sft");
  if (type != "sft" && type != "pg") fail("loss.type must be sft or pg, got '" + type + "'");
  c.loss.type = type == "sft" ? LossType::sft : LossType::pg;
  if (c.loss.type == LossType::sft) {
    for (const char* key : {"average", "clip_eps"})
      if (present(root["loss"][key])) fail(std::string("loss.") + key + " applies to loss.type pg");
    return;
  }
  const std::string average = get<std::string>(root, "loss", "average", "token");
  if (average != "token" && average != "sequence")
    fail("loss.average must be token or sequence, got '" + average + "'");
  c.loss.average = average == "token" ? LossAverage::token : LossAverage::sequence;
  c.loss.clip_eps = get<double>(root, "loss", "clip_eps", 0.0);
  if (!(c.loss.clip_eps >= 0 && c.loss.clip_eps < 1))
    fail("loss.clip_eps must be in [0, 1) (0: no clipping), got " +
         written(root["loss"]["clip_eps"]));
  if (c.data.format != data::DataFormat::rollouts)
    fail("loss.type pg trains on rollouts: set data.format rollouts (records with \"advantages\")");
}

}  // namespace

std::string TrainConfig::recipe_name() const {
  return draft_kind ? std::string(draft_kind->name()) : eagle3 ? "eagle3" : "sft";
}

namespace {

TrainConfig load(const std::string& path, const std::vector<std::string>& overrides,
                 const speculative::DraftKind* draft_kind, bool eagle3) {
  YAML::Node root = data::load_yaml_file(path);
  try {
    if (!root.IsMap()) fail("the config must be a mapping");
    make_config_paths_absolute(root, std::filesystem::absolute(path).parent_path());
    for (const std::string& o : overrides) apply_override(root, o);
    make_config_paths_absolute(root, std::filesystem::current_path());
    follow_runs_to_their_latest(root);
    check_section(root, "");
    for (const auto& [section, keys] : schema())
      if (!section.empty() && present(root[section])) check_section(root[section], section);

    TrainConfig c;
    c.run_dir = get<std::string>(root, "", "run_dir", "");
    if (c.run_dir.empty()) fail("run_dir is required");
    c.seed = get<uint64_t>(root, "", "seed", 0);
    c.device = get<std::string>(root, "", "device", "auto");
    if (c.device != "auto" && c.device != "cpu" && c.device != "cuda")
      fail("device must be auto, cpu or cuda, got '" + c.device + "'");
    c.draft_kind = draft_kind;
    c.eagle3 = eagle3;
    const bool dflash = c.is_draft();
    if (dflash) {
      if (present(root["model"]))
        fail("sprig train " + c.recipe_name() + " reads target: and draft:, not model:");
      parse_target(root, c);
      if (eagle3)
        parse_eagle3(root, c);
      else
        parse_dflash(root, c);
    } else {
      if (present(root["target"]) || present(root["draft"]))
        fail("target: and draft: are sections of the draft recipes (sprig train " +
             speculative::draft_kind_names() + ", eagle3), not of sprig train sft");
      if (!present(root["model"])) fail("the model: section is required");
      if (present(root["model"]["path"]))
        c.model_path = get<std::string>(root, "model", "path", "");
      if (present(root["model"]["config"]))
        c.model_config = get<std::string>(root, "model", "config", "");
      if (c.model_path.empty() == c.model_config.empty())
        fail("give exactly one of model.path (a checkpoint) or model.config (a fresh init)");
    }
    const char* dtype_section = dflash ? "draft" : "model";
    c.model_dtype = get<std::string>(root, dtype_section, "dtype", "auto");
    if (c.model_dtype != "auto" && c.model_dtype != "bf16" && c.model_dtype != "f32")
      fail(std::string(dtype_section) + ".dtype must be auto, bf16 or f32, got '" + c.model_dtype +
           "'");
    if (present(root["attention"])) {  // left out of the resolved config when absent
      const std::string backend = get<std::string>(root, "attention", "backend", "auto");
      if (backend != "auto" && backend != "sprig" && backend != "cudnn")
        fail("attention.backend must be auto, sprig or cudnn, got '" + backend + "'");
      c.attention_backend = parse_attention_backend(backend);
    }
    c.data = data::parse_data_config(root);
    if (dflash && present(root["loss"]))
      fail(
          std::string("loss: is a section of sprig train sft; the draft recipes set their loss "
                      "in draft:"));
    if (!dflash) parse_loss(root, c);

    c.max_steps = get<int64_t>(root, "train", "max_steps", 0);
    c.num_epochs = get<int64_t>(root, "train", "num_epochs", 1);
    c.grad_accumulation_steps = get<int64_t>(root, "train", "grad_accumulation_steps", 1);
    c.max_grad_norm = get<double>(root, "train", "max_grad_norm", 1.0);
    // SFT normalises over the window's supervised tokens, the drafts average micro-batch means:
    // each as the reference's recipe does (docs/semantics.md §10.4).
    const std::string normalization =
        get<std::string>(root, "train", "loss_normalization", dflash ? "mean" : "tokens");
    c.max_consecutive_skips = get<int64_t>(root, "train", "max_consecutive_skips", 10);
    if (c.max_consecutive_skips < 0)
      fail("train.max_consecutive_skips must be >= 0, got " +
           written(root["train"]["max_consecutive_skips"]));
    c.activation_checkpointing = parse_activation_checkpointing(
        get<std::string>(root, "train", "activation_checkpointing", "none"));
    const std::string shard = get<std::string>(root, "train", "shard", "none");
    if (shard != "none" && shard != "optimizer" && shard != "gradients")
      fail("train.shard must be none, optimizer or gradients, got '" + shard + "'");
    c.shard = shard == "optimizer"   ? Sharding::optimizer
              : shard == "gradients" ? Sharding::gradients
                                     : Sharding::none;
    if (c.max_steps < 0)
      fail("train.max_steps must be >= 0 (0: train.num_epochs), got " +
           written(root["train"]["max_steps"]));
    if (c.num_epochs <= 0)
      fail("train.num_epochs must be >= 1, got " + written(root["train"]["num_epochs"]));
    if (c.grad_accumulation_steps <= 0)
      fail("train.grad_accumulation_steps must be >= 1, got " +
           written(root["train"]["grad_accumulation_steps"]));
    if (!(c.max_grad_norm >= 0))
      fail("train.max_grad_norm must be >= 0 (0: no clipping), got " +
           written(root["train"]["max_grad_norm"]));
    if (normalization != "mean" && normalization != "tokens")
      fail("train.loss_normalization must be mean or tokens, got '" + normalization + "'");
    c.loss_normalization =
        normalization == "mean" ? LossNormalization::mean : LossNormalization::tokens;

    c.optimizer.lr = get<double>(root, "optimizer", "lr", dflash && !eagle3 ? 6e-4 : 1e-4);
    const auto betas =
        get<std::vector<double>>(root, "optimizer", "betas", {0.9, dflash ? 0.95 : 0.999});
    if (betas.size() != 2) fail("optimizer.betas must be a list of two numbers");
    c.optimizer.beta1 = betas[0];
    c.optimizer.beta2 = betas[1];
    c.optimizer.weight_decay = get<double>(root, "optimizer", "weight_decay", 0.0);
    c.optimizer.eps = get<double>(root, "optimizer", "eps", 1e-8);
    if (c.optimizer.lr <= 0)
      fail("optimizer.lr must be positive, got " + written(root["optimizer"]["lr"]));
    if (!(c.optimizer.eps > 0 && c.optimizer.eps < 1))
      fail("optimizer.eps must be in (0, 1), got " + written(root["optimizer"]["eps"]));
    for (double beta : betas)
      if (!(beta >= 0 && beta < 1))
        fail("optimizer.betas must both be in [0, 1), got " + written(root["optimizer"]["betas"]));
    if (!(c.optimizer.weight_decay >= 0))
      fail("optimizer.weight_decay must be >= 0, got " +
           written(root["optimizer"]["weight_decay"]));
    // Decoupled decay multiplies the weights by 1 - lr * weight_decay at the peak.
    if (c.optimizer.lr * c.optimizer.weight_decay >= 1)
      fail("optimizer.weight_decay " + written(root["optimizer"]["weight_decay"]) +
           " with optimizer.lr " + written(root["optimizer"]["lr"]) +
           " would scale the weights by 1 - lr * weight_decay <= 0 at every step: their "
           "product must be below 1");

    c.warmup_steps = get<int64_t>(root, "scheduler", "warmup_steps", -1);
    const double default_warmup_ratio = dflash ? 0.05 : 0.0;
    c.warmup_ratio = get<double>(root, "scheduler", "warmup_ratio", default_warmup_ratio);
    c.min_lr_ratio = get<double>(root, "scheduler", "min_lr_ratio", 0.1);
    if (c.min_lr_ratio < 0 || c.min_lr_ratio > 1)
      fail("scheduler.min_lr_ratio must be in [0, 1], got " +
           written(root["scheduler"]["min_lr_ratio"]));
    if (c.warmup_ratio < 0 || c.warmup_ratio > 1)
      fail("scheduler.warmup_ratio must be in [0, 1], got " +
           written(root["scheduler"]["warmup_ratio"]));
    if (c.warmup_steps < -1)
      fail("scheduler.warmup_steps must be >= 0 (-1: from warmup_ratio), got " +
           std::to_string(c.warmup_steps));

    c.log_every_steps = get<int64_t>(root, "log", "every_steps", 10);
    c.checkpoint_every_steps = get<int64_t>(root, "checkpoint", "every_steps", 0);
    c.keep_last = get<int64_t>(root, "checkpoint", "keep_last", 3);
    c.val_every_steps = get<int64_t>(root, "val", "every_steps", 0);
    if (c.log_every_steps < 1)
      fail("log.every_steps must be >= 1, got " + std::to_string(c.log_every_steps));
    if (c.checkpoint_every_steps < 0)
      fail("checkpoint.every_steps must be >= 0 (0: only the final checkpoint), got " +
           std::to_string(c.checkpoint_every_steps));
    if (c.keep_last < 1)
      fail("checkpoint.keep_last must be >= 1, got " + std::to_string(c.keep_last));
    if (c.val_every_steps < 0)
      fail("val.every_steps must be >= 0 (0: only after the last step), got " +
           std::to_string(c.val_every_steps));
    // Given, but overruled by another setting: said, not silently dropped.
    if (c.max_steps > 0 && c.num_epochs != 1)
      c.unused.push_back("train.num_epochs " + std::to_string(c.num_epochs) +
                         " is not used: train.max_steps " + std::to_string(c.max_steps) +
                         " sets the run's length");
    if (c.warmup_steps >= 0 && c.warmup_ratio != default_warmup_ratio)
      c.unused.push_back("scheduler.warmup_ratio " + written(root["scheduler"]["warmup_ratio"]) +
                         " is not used: scheduler.warmup_steps " + std::to_string(c.warmup_steps) +
                         " sets the warmup");
    if (c.val_every_steps > 0 && c.data.val.empty())
      fail("val.every_steps " + std::to_string(c.val_every_steps) +
           " applies when data.val names the validation data; there is none");
    c.resolved_yaml = YAML::Dump(root) + "\n";
    return c;
  } catch (const std::invalid_argument& e) {
    // Said where the offending value came from: the override of the key the message names first
    // (the last of that key's, the one in effect), else the file.
    const std::string message = e.what();
    const std::string* source = nullptr;
    size_t first = std::string::npos;
    for (const std::string& o : overrides)
      if (const size_t at = where_named(message, o.substr(0, o.find('=')));
          at <= first && at != std::string::npos) {
        first = at;
        source = &o;
      }
    if (source != nullptr)
      throw OverrideError(message + " (from the command line: --" + *source + ")");
    throw std::invalid_argument(message + " (in " + path + ")");
  }
}

}  // namespace

TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides,
                              const speculative::DraftKind* draft_kind) {
  return load(path, overrides, draft_kind, false);
}

TrainConfig load_eagle3_train_config(const std::string& path,
                                     const std::vector<std::string>& overrides) {
  return load(path, overrides, nullptr, true);
}

std::string with_override(const std::string& resolved_yaml, const std::string& override_text) {
  YAML::Node root = YAML::Load(resolved_yaml);
  apply_override(root, override_text);
  return YAML::Dump(root) + "\n";
}

namespace {

// Every leaf of a config as "a.b" -> its value in one line (a list is one leaf).
// Each leaf by its dotted key: the value as written, and as it compares.
void flatten(const YAML::Node& node, const std::string& prefix,
             std::map<std::string, std::pair<std::string, std::string>>& out) {
  if (!node.IsMap()) {
    out[prefix] = {written(node), compared(node)};
    return;
  }
  for (const auto& entry : node)
    flatten(entry.second, (prefix.empty() ? "" : prefix + ".") + entry.first.as<std::string>(),
            out);
}

// Settings that say where a run is, how long it runs, what it reports or how it computes (the
// kernels, what it recomputes, where the optimizer's state lives), not what it computes.
bool alters_run(const std::string& key) {
  static const std::vector<std::string> keys = {"run_dir",
                                                "train.max_steps",
                                                "train.num_epochs",
                                                "log.every_steps",
                                                "val.every_steps",
                                                "checkpoint.every_steps",
                                                "checkpoint.keep_last",
                                                "attention.backend",
                                                "train.activation_checkpointing",
                                                "train.shard"};
  return std::find(keys.begin(), keys.end(), key) == keys.end();
}

}  // namespace

std::vector<ConfigChange> config_changes(const std::string& before, const std::string& after) {
  std::map<std::string, std::pair<std::string, std::string>> old_values, new_values;
  flatten(YAML::Load(before), "", old_values);
  flatten(YAML::Load(after), "", new_values);
  std::map<std::string, ConfigChange> changes;
  for (const auto& [key, value] : old_values)
    changes[key] = {key, value.first, "(absent)", alters_run(key)};
  for (const auto& [key, value] : new_values) {
    auto it = changes.find(key);
    if (it == changes.end())
      changes[key] = {key, "(absent)", value.first, alters_run(key)};
    else if (old_values.at(key).second == value.second)
      changes.erase(it);
    else
      it->second.after = value.first;
  }
  std::vector<ConfigChange> out;
  for (auto& [key, change] : changes) out.push_back(std::move(change));
  return out;
}

}  // namespace sprig
