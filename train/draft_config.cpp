// The draft recipes' sections of a training config: target:, and draft: of sprig train eagle3 and
// of the DFlash-family kinds (docs/semantics.md §11).
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <string>
#include <vector>

#include "data/config.h"
#include "speculative/draft_kind.h"
#include "train/config_yaml.h"

namespace sprig::config_yaml {

namespace {

// With draft.init the draft's shape is its own config's: a shape key given as well must agree with
// it, and the resolved config records the values the draft has (never one that was not used).
void adopt_init_shape(YAML::Node& root, const speculative::DraftKind& kind) {
  if (!present(root["draft"]) || !present(root["draft"]["init"])) return;
  const std::string init = get<std::string>(root, "draft", "init", "");
  const speculative::DraftConfig from = speculative::load_draft_config(init);
  const auto adopt = [&](const char* key, YAML::Node used) {
    const YAML::Node given = root["draft"][key];
    if (used.IsSequence()) used.SetStyle(YAML::EmitterStyle::Flow);
    if (present(given) && compared(given) != compared(used))
      fail(std::string("draft.") + key + " " + written(given) + " differs from draft.init " + init +
           "'s " + written(used) +
           ": leave it out (the draft's own config holds), or train a fresh draft without "
           "draft.init");
    root["draft"][key] = used;
  };
  adopt("mask_token_id", YAML::Node(from.mask_token_id));
  adopt("num_layers", YAML::Node(from.layers.num_hidden_layers));
  adopt("block_size", YAML::Node(from.block_size));
  adopt("target_layer_ids", YAML::Node(from.target_layer_ids));
  adopt("num_attention_heads", YAML::Node(from.layers.num_attention_heads));
  adopt("num_key_value_heads", YAML::Node(from.layers.num_key_value_heads));
  adopt("head_dim", YAML::Node(from.layers.head_dim));
  adopt("sliding_window", YAML::Node(from.sliding_window));
  if (!kind.is_kind_of(from)) return;  // another kind: refused with the draft
  const speculative::DraftSettings fixed = kind.settings_of(from);  // integers and flags
  for (const speculative::DraftSetting& setting : kind.train_settings()) {
    const auto it = fixed.integers.find(setting.key);
    if (it == fixed.integers.end()) continue;
    adopt(setting.key.c_str(), setting.type == speculative::DraftSetting::Type::flag
                                   ? YAML::Node(it->second != 0)
                                   : YAML::Node(it->second));
  }
}

// Refuses a setting of draft: that another draft kind has and `kind` has not.
void refuse_other_kinds_settings(const YAML::Node& root, const speculative::DraftKind& kind) {
  if (!present(root["draft"])) return;
  const auto has = [](const speculative::DraftKind& k, const std::string& key) {
    const std::vector<speculative::DraftSetting> settings = k.train_settings();
    return std::any_of(settings.begin(), settings.end(),
                       [&](const speculative::DraftSetting& s) { return s.key == key; });
  };
  for (const speculative::DraftKind* other : speculative::draft_kinds())
    for (const speculative::DraftSetting& setting : other->train_settings()) {
      if (has(kind, setting.key) || !root["draft"][setting.key].IsDefined()) continue;
      std::string owners;
      for (const speculative::DraftKind* owner : speculative::draft_kinds())
        if (has(*owner, setting.key))
          owners +=
              (owners.empty() ? "sprig train " : " and sprig train ") + std::string(owner->name());
      fail("draft." + setting.key + " is a setting of " + owners + ", not of sprig train " +
           std::string(kind.name()));
    }
}

// A setting of draft: (speculative::DraftSetting), read (an absent one as its default, recorded),
// checked and handed over by name.
void parse_setting(YAML::Node& root, const speculative::DraftSetting& setting,
                   speculative::DraftSettings& settings) {
  using Type = speculative::DraftSetting::Type;
  const char* key = setting.key.c_str();
  double value = 0;  // for the range check
  if (setting.type == Type::number) {
    const bool none = setting.null_is_zero && root["draft"][key].IsDefined() &&
                      root["draft"][key].IsNull();  // null: none
    value = settings.numbers[setting.key] =
        none ? 0 : get<double>(root, "draft", key, setting.fallback);
  } else {
    const int64_t v =
        setting.type == Type::flag
            ? get<bool>(root, "draft", key, setting.fallback != 0)
            : get<int64_t>(root, "draft", key, static_cast<int64_t>(setting.fallback));
    settings.integers[setting.key] = v;
    value = static_cast<double>(v);
  }
  if (const std::string refusal = setting.refusal(value); !refusal.empty())
    fail("draft." + setting.key + " " + refusal + ", got " + written(root["draft"][key]));
}

// The keys of draft: that only sprig train eagle3 reads, and those it reads besides.
const std::vector<std::string> kEagle3Keys = {"aux_layer_ids", "ttt_steps"};
const std::vector<std::string> kEagle3SharedKeys = {"dtype", "init", "vocab"};

}  // namespace

void parse_target(YAML::Node& root, TrainConfig& c) {
  if (present(root["target"]) && present(root["target"]["path"]))
    c.target_path = get<std::string>(root, "target", "path", "");
  if (present(root["target"]) && present(root["target"]["config"]))
    c.target_config = get<std::string>(root, "target", "config", "");
  if (c.target_path.empty() == c.target_config.empty())
    fail(
        "give exactly one of target.path (the frozen target: an HF directory or a sprig "
        "checkpoint) or target.config (a fresh target from a config.json)");
}

// draft: of sprig train eagle3 (its own keys and draft.dtype; the DFlash family's are refused).
void parse_eagle3(YAML::Node& root, TrainConfig& c) {
  if (present(root["draft"]))
    for (const auto& entry : root["draft"]) {
      const std::string key = entry.first.as<std::string>();
      if (std::find(kEagle3Keys.begin(), kEagle3Keys.end(), key) == kEagle3Keys.end() &&
          std::find(kEagle3SharedKeys.begin(), kEagle3SharedKeys.end(), key) ==
              kEagle3SharedKeys.end())
        fail("draft." + key + " is a setting of the DFlash drafts (sprig train " +
             speculative::draft_kind_names() + "), not of sprig train eagle3");
    }
  Eagle3TrainConfig& e = c.eagle3_draft;
  // Absent: the default rule (left out of the resolved config, which cannot know the target's
  // depth).
  if (present(root["draft"]) && present(root["draft"]["aux_layer_ids"])) {
    e.draft.aux_layer_ids = get<std::vector<int64_t>>(root, "draft", "aux_layer_ids", {});
    if (e.draft.aux_layer_ids.empty())
      fail(
          "draft.aux_layer_ids is empty: list the target layers the draft reads, or leave the key "
          "out for the default ids");
  }
  e.ttt_steps = get<int64_t>(root, "draft", "ttt_steps", 7);
  if (present(root["draft"]["vocab"])) e.vocab = get<std::string>(root, "draft", "vocab", "");
  if (present(root["draft"]["init"])) {
    e.init = get<std::string>(root, "draft", "init", "");
    for (const char* key : {"aux_layer_ids", "vocab"})
      if (present(root["draft"][key]))
        fail(std::string("draft.") + key + " is the draft's own with draft.init " + e.init +
             ": leave it out, or train a fresh draft without draft.init");
  }
  if (e.ttt_steps < 1)
    fail("draft.ttt_steps must be >= 1, got " + written(root["draft"]["ttt_steps"]));
}

// draft: of sprig train dflash|domino|jetspec.
void parse_dflash(YAML::Node& root, TrainConfig& c) {
  DFlashConfig& d = c.dflash;
  const speculative::DraftKind& kind = *c.draft_kind;
  // draft.<key> (`value`) at least `min`; `note` says what the limit means.
  const auto at_least = [&](const char* key, int64_t value, int64_t min, const char* note = "") {
    if (value < min)
      fail(std::string("draft.") + key + " must be >= " + std::to_string(min) + note + ", got " +
           written(root["draft"][key]));
  };
  refuse_other_kinds_settings(root, kind);
  for (const std::string& key : kEagle3Keys)
    if (present(root["draft"]) && root["draft"][key].IsDefined())
      fail("draft." + key + " is a setting of sprig train eagle3, not of sprig train " +
           std::string(kind.name()));
  adopt_init_shape(root, kind);
  if (!present(root["draft"]) || !present(root["draft"]["mask_token_id"]))
    fail(
        "draft.mask_token_id is required: the token every non-anchor slot shows (an id of the "
        "target's vocabulary, e.g. Qwen3's first unused id 151669)");
  speculative::DraftOptions& o = d.draft;
  o.mask_token_id = get<int64_t>(root, "draft", "mask_token_id", -1);
  o.num_layers = get<int64_t>(root, "draft", "num_layers", 5);
  o.block_size = get<int64_t>(root, "draft", "block_size", 16);
  // Absent: the default rule of speculative/draft.h (left out of the resolved config, which cannot
  // know the target's depth); an empty list is refused, as in a draft's config.json.
  if (present(root["draft"]["target_layer_ids"])) {
    o.target_layer_ids = get<std::vector<int64_t>>(root, "draft", "target_layer_ids", {});
    if (o.target_layer_ids.empty())
      fail(
          "draft.target_layer_ids is empty: list the target layers the draft reads, or leave the "
          "key out for the default ids");
  }
  o.num_attention_heads = get<int64_t>(root, "draft", "num_attention_heads", 0);
  o.num_key_value_heads = get<int64_t>(root, "draft", "num_key_value_heads", 0);
  o.head_dim = get<int64_t>(root, "draft", "head_dim", 0);
  o.sliding_window = get<int64_t>(root, "draft", "sliding_window", 0);
  d.num_anchors = get<int64_t>(root, "draft", "num_anchors", 512);
  const std::vector<std::string> loss_types = kind.loss_types();
  const std::string loss_type = get<std::string>(root, "draft", "loss_type", loss_types[0]);
  speculative::loss_type_from_name(loss_type);  // a name sprig knows
  if (std::find(loss_types.begin(), loss_types.end(), loss_type) == loss_types.end())
    fail("draft.loss_type must be " + loss_types[0] + " for sprig train " +
         std::string(kind.name()) + ", got " + loss_type);
  d.settings.words["loss_type"] = loss_type;
  for (const speculative::DraftSetting& setting : kind.train_settings())
    parse_setting(root, setting, d.settings);
  kind.shape(o, d.settings);
  parse_setting(root, speculative::prefix_weight_base_setting(), d.settings);
  d.init = get<std::string>(root, "draft", "init", "");
  if (present(root["draft"]["vocab"])) {
    d.vocab = get<std::string>(root, "draft", "vocab", "");
    if (!d.init.empty())
      fail("draft.vocab is the draft's own with draft.init " + d.init +
           ": leave it out, or train a fresh draft without draft.init");
  }
  at_least("mask_token_id", o.mask_token_id, 0);
  at_least("num_layers", o.num_layers, 1);
  at_least("block_size", o.block_size, speculative::kMinBlockSize);
  at_least("num_anchors", d.num_anchors, 1);
  at_least("sliding_window", o.sliding_window, 0, " (0: none)");
  for (const auto& [key, value] :
       {std::pair<const char*, int64_t>{"num_attention_heads", o.num_attention_heads},
        {"num_key_value_heads", o.num_key_value_heads},
        {"head_dim", o.head_dim}})
    at_least(key, value, 0, " (0: the target's)");
}

}  // namespace sprig::config_yaml
