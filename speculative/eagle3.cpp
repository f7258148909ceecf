#include "speculative/eagle3.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "attention/mask.h"
#include "autograd/checkpoint.h"
#include "nn/checkpoint.h"
#include "nn/loss.h"
#include "speculative/objective.h"  // acceptance
#include "tensor/input_file.h"
#include "tensor/json_text.h"

namespace sprig::speculative {

namespace {

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("[eagle3] " + message);
}

}  // namespace

std::vector<int64_t> default_aux_layer_ids(int64_t target_layers) {
  return {1, target_layers / 2 - 1, target_layers - 4};
}

void Eagle3Config::check() const {
  if (aux_layer_ids.empty()) fail("aux_layer_ids is empty: fc needs at least one target layer");
  std::set<int64_t> seen;
  for (int64_t id : aux_layer_ids) {
    if (id < 0 || id >= num_target_layers)
      fail("aux_layer_ids " + nlohmann::json(aux_layer_ids).dump() + ": " + std::to_string(id) +
           " is outside the target's layers [0, " + std::to_string(num_target_layers) + ")");
    if (!seen.insert(id).second)
      fail("aux_layer_ids " + nlohmann::json(aux_layer_ids).dump() + " repeats layer " +
           std::to_string(id));
  }
  if (draft_vocab_size < 1 || draft_vocab_size > layer.vocab_size)
    fail("draft_vocab_size must be in [1, " + std::to_string(layer.vocab_size) +
         "] (the target's vocabulary), got " + std::to_string(draft_vocab_size));
}

Eagle3Config eagle3_config_for(const QwenConfig& target, const Eagle3Options& options) {
  nlohmann::json j = target.to_json();
  for (const char* key : {"layer_types", "use_sliding_window", "sliding_window",
                          "max_window_layers", "bos_token_id", "eos_token_id", "auto_map"})
    j.erase(key);
  j["num_hidden_layers"] = 1;
  Eagle3Config c;
  c.layer = QwenConfig::from_json(j, "[eagle3] config");
  c.num_target_layers = target.num_hidden_layers;
  c.aux_layer_ids = options.aux_layer_ids.empty() ? default_aux_layer_ids(target.num_hidden_layers)
                                                  : options.aux_layer_ids;
  c.draft_vocab_size = options.draft_vocab_size > 0 ? options.draft_vocab_size : target.vocab_size;
  if (options.aux_layer_ids.empty() && target.num_hidden_layers < 8)
    fail(
        "the default aux_layer_ids [1, L/2 - 1, L - 4] need a target of at least 8 layers, this "
        "one has " +
        std::to_string(target.num_hidden_layers) + ": set aux_layer_ids");
  c.check();
  return c;
}

namespace {

// The architectures a config.json of an EAGLE-3 draft declares: the engines' names, and the
// reference's.
const std::vector<std::string> kArchitectures = {"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM",
                                                 "LlamaEagle3DraftModel"};
constexpr const char* kAuxKey = "eagle_aux_hidden_state_layer_ids";

}  // namespace

nlohmann::json Eagle3Config::to_json(DType dtype) const {
  QwenConfig c = layer;
  c.dtype = dtype;
  nlohmann::json j = c.to_json();
  j["architectures"] = {kArchitectures[0]};
  j["model_type"] = "llama";
  j["num_hidden_layers"] = 1;
  j["draft_vocab_size"] = draft_vocab_size;
  j["target_hidden_size"] = layer.hidden_size;
  j["tie_word_embeddings"] = false;
  j["attention_bias"] = j["mlp_bias"] = false;
  j["eagle_config"] = {{kAuxKey, aux_layer_ids}, {"use_aux_hidden_state", true}};
  std::vector<int64_t> inputs(aux_layer_ids);
  for (int64_t& id : inputs) ++id;
  j[kAuxKey] = inputs;
  return j;
}

Eagle3Config Eagle3Config::from_json(const nlohmann::json& j, const std::string& label) {
  const auto refuse = [&](const std::string& message) {
    throw std::runtime_error(label + ": " + message);
  };
  const nlohmann::json arch = j.value("architectures", nlohmann::json::array());
  const bool eagle3 =
      arch.is_array() && std::any_of(arch.begin(), arch.end(), [](const auto& a) {
        return a.is_string() && std::find(kArchitectures.begin(), kArchitectures.end(),
                                          a.template get<std::string>()) != kArchitectures.end();
      });
  if (!eagle3)
    refuse("architectures " + arch.dump() + " declare no EAGLE-3 draft (LlamaForCausalLMEagle3)");
  // The reference's recipe saves its target's config with the draft's keys: num_hidden_layers is
  // the target's depth (the draft has one layer all the same) and no aux layers are named.
  const bool reference = std::find(arch.begin(), arch.end(), kArchitectures[2]) != arch.end();
  if (j.contains("num_hidden_layers") && !j["num_hidden_layers"].is_number_integer())
    refuse("num_hidden_layers must be an integer, got " + j["num_hidden_layers"].dump());
  if (!reference && j.value("num_hidden_layers", 1) != 1)
    refuse("num_hidden_layers " + j["num_hidden_layers"].dump() +
           ": sprig's EAGLE-3 drafts have one layer");
  for (const char* key :
       {"attention_bias", "mlp_bias", "fc_norm", "norm_output", "parallel_drafting"})
    if (j.value(key, false) == true)
      refuse(std::string(key) +
             " true: sprig's EAGLE-3 layer has no biases, fc norms, output norm or parallel "
             "drafting");
  nlohmann::json q = j;
  q["model_type"] = "qwen3";
  q["architectures"] = {"Qwen3ForCausalLM"};
  q["num_hidden_layers"] = 1;
  for (const char* key :
       {"layer_types", "use_sliding_window", "sliding_window", "max_window_layers"})
    q.erase(key);
  Eagle3Config c;
  c.layer = QwenConfig::from_json(q, label);
  c.draft_vocab_size = j.value("draft_vocab_size", c.layer.vocab_size);
  if (j.value("target_hidden_size", c.layer.hidden_size) != c.layer.hidden_size)
    refuse("target_hidden_size " + j["target_hidden_size"].dump() + " differs from hidden_size " +
           std::to_string(c.layer.hidden_size) + ": sprig's EAGLE-3 drafts share the target's");
  const auto ids = [&](const nlohmann::json& v, const std::string& key) {
    if (!v.is_array() || v.empty() ||
        !std::all_of(v.begin(), v.end(), [](const auto& x) { return x.is_number_integer(); }))
      refuse(key + " must be a non-empty list of layer ids, got " + v.dump());
    return v.get<std::vector<int64_t>>();
  };
  const nlohmann::json nested = j.value("eagle_config", nlohmann::json::object());
  if (nested.contains(kAuxKey)) {
    c.aux_layer_ids = ids(nested[kAuxKey], std::string("eagle_config.") + kAuxKey);
    if (j.contains(kAuxKey)) {
      std::vector<int64_t> inputs = ids(j[kAuxKey], kAuxKey);
      for (int64_t& id : inputs) --id;
      if (inputs != c.aux_layer_ids)
        refuse(std::string(kAuxKey) + " " + j[kAuxKey].dump() +
               " (the layers' inputs) and eagle_config." + kAuxKey + " " + nested[kAuxKey].dump() +
               " (their outputs) name different layers: an engine would read other states");
    }
  } else if (j.contains(kAuxKey)) {
    c.aux_layer_ids = ids(j[kAuxKey], kAuxKey);
    for (int64_t& id : c.aux_layer_ids) --id;
  } else if (reference && j.value("num_hidden_layers", int64_t{0}) >= 8) {
    c.aux_layer_ids = default_aux_layer_ids(j["num_hidden_layers"].get<int64_t>());
    std::cerr << label << ": warning: names no aux layers; reading the reference's default "
              << nlohmann::json(c.aux_layer_ids).dump() << " for its target of "
              << j["num_hidden_layers"] << " layers (a run that set other ids needs them in "
              << "eagle_config." << kAuxKey << ")\n";
  } else {
    refuse(std::string("names no aux layers: set eagle_config.") + kAuxKey +
           " (the target layers whose outputs fc reads)");
  }
  c.num_target_layers = *std::max_element(c.aux_layer_ids.begin(), c.aux_layer_ids.end()) + 1;
  if (reference)
    c.num_target_layers = std::max(c.num_target_layers, j.value("num_hidden_layers", int64_t{0}));
  try {
    c.check();
  } catch (const std::invalid_argument& e) {
    refuse(e.what());
  }
  return c;
}

// ---- the draft ----------------------------------------------------------------------------------

namespace {

// The draft's attention: the target's shape, over [embedding | state] (2H), without q/k norms
// or biases (the engines' Llama-style EAGLE-3 layer).
AttentionConfig eagle3_attention(const QwenConfig& c) {
  AttentionConfig a = AttentionConfig::of_layer(c, 0);
  a.qkv_bias = a.o_bias = a.qk_norm = false;
  a.sliding_window = 0;
  return a;
}

}  // namespace

Eagle3Layer::Eagle3Layer(const QwenConfig& c, Generator& gen)
    : input_layernorm(register_module("input_layernorm",
                                      std::make_unique<RMSNorm>(c.hidden_size, c.rms_norm_eps))),
      hidden_norm(
          register_module("hidden_norm", std::make_unique<RMSNorm>(c.hidden_size, c.rms_norm_eps))),
      post_attention_layernorm(register_module(
          "post_attention_layernorm", std::make_unique<RMSNorm>(c.hidden_size, c.rms_norm_eps))),
      self_attn(register_module(
          "self_attn", std::make_unique<QwenAttention>(eagle3_attention(c), 2 * c.hidden_size, 0,
                                                       c.initializer_range, gen))),
      mlp(register_module("mlp", std::make_unique<QwenMLP>(c.hidden_size, c.intermediate_size,
                                                           c.initializer_range, gen))) {}

Var Eagle3Layer::forward(const Var& embeds, const Var& hidden, const Tensor& positions,
                         TttKeys& keys, const std::shared_ptr<const AttentionMask>& mask,
                         bool checkpointed) const {
  const Var x = concat({input_layernorm.forward(embeds), hidden_norm.forward(hidden)}, 2);
  const QwenAttention::Projections p = self_attn.project(x, positions);
  keys.k.push_back(p.k);
  keys.v.push_back(p.v);
  // The rest of the step from [hidden, q, k_0 .. k_n, v_0 .. v_n].
  const Segment rest = [this, mask](const std::vector<Var>& in) {
    const auto steps = static_cast<std::ptrdiff_t>((in.size() - 2) / 2);
    const std::vector<Var> k(in.begin() + 2, in.begin() + 2 + steps),
        v(in.begin() + 2 + steps, in.end());
    const Var h = in[0] + self_attn.attend(in[1], concat(k, 1), concat(v, 1), mask);
    return h + mlp.forward(post_attention_layernorm.forward(h));
  };
  std::vector<Var> inputs = {hidden, p.q};
  inputs.insert(inputs.end(), keys.k.begin(), keys.k.end());
  inputs.insert(inputs.end(), keys.v.begin(), keys.v.end());
  if (!checkpointed) return rest(inputs);
  std::vector<Var> parameters = self_attn.o_proj.parameters();
  for (const Module* m : std::initializer_list<const Module*>{&mlp, &post_attention_layernorm})
    for (const Var& w : m->parameters()) parameters.push_back(w);
  return checkpoint(rest, inputs, parameters);
}

std::vector<ParameterPart> Eagle3Config::parameter_parts() const {
  const auto n = [](int64_t a, int64_t b) {
    return static_cast<double>(a) * static_cast<double>(b);
  };
  const QwenConfig& c = layer;
  const std::string H = "hidden_size " + std::to_string(c.hidden_size);
  const int64_t qkv = (c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim;
  // The embedding is the target's (frozen, not the draft's); the norms: the embeddings', the
  // states', the post-attention one and the final one.
  return {{n(aux_width(), c.hidden_size),
           std::to_string(aux_layer_ids.size()) + " aux_layer_ids x " + H + " x " + H},
          {n(2 * c.hidden_size, qkv) + n(c.num_attention_heads * c.head_dim, c.hidden_size) +
               3 * n(c.hidden_size, c.intermediate_size) + 4 * n(1, c.hidden_size),
           "the decoder layer"},
          {n(draft_vocab_size, c.hidden_size),
           "draft_vocab_size " + std::to_string(draft_vocab_size) + " x " + H}};
}

namespace {

const Eagle3Config& checked(const Eagle3Config& c) {
  c.check();
  check_parameters_fit(c.parameter_parts(), "eagle3");
  return c;
}

}  // namespace

Var Eagle3Layer::decode(const Var& embeds, const Var& hidden, const Tensor& positions,
                        KVCache& cache) const {
  const int64_t m = embeds.size(1), past = cache.length();
  Mask mask{m, past + m, {Rect{0, m, past, past + m, RectKind::causal}}};
  if (past > 0) mask.rects.push_back(Rect{0, m, 0, past});
  return decode(embeds, hidden, positions, cache, std::move(mask));
}

Var Eagle3Layer::decode(const Var& embeds, const Var& hidden, const Tensor& positions,
                        KVCache& cache, Mask mask) const {
  const Var x = concat({input_layernorm.forward(embeds), hidden_norm.forward(hidden)}, 2);
  const Var h =
      hidden + self_attn.forward(x, positions, x, positions,
                                 compile_attention_mask(BatchMask(std::move(mask))), &cache);
  return h + mlp.forward(post_attention_layernorm.forward(h));
}

Eagle3Draft::Eagle3Draft(Eagle3Config config, Generator& gen)
    : config_(checked(config)),
      vocabulary_(config_.draft_vocab_size == config_.layer.vocab_size
                      ? DraftVocabulary::whole(config_.layer.vocab_size)
                      : DraftVocabulary{}),
      fc(register_module(
          "fc", std::make_unique<Linear>(config_.aux_width(), config_.layer.hidden_size, false,
                                         config_.layer.initializer_range, gen))),
      layer(register_module("midlayer", std::make_unique<Eagle3Layer>(config_.layer, gen))),
      norm(register_module("norm", std::make_unique<RMSNorm>(config_.layer.hidden_size,
                                                             config_.layer.rms_norm_eps))),
      lm_head(register_module(
          "lm_head", std::make_unique<Linear>(config_.layer.hidden_size, config_.draft_vocab_size,
                                              false, config_.layer.initializer_range, gen))) {}

void Eagle3Draft::set_vocabulary(DraftVocabulary vocabulary) {
  if (vocabulary.vocab_size != config_.layer.vocab_size ||
      vocabulary.size() != config_.draft_vocab_size)
    fail("a draft vocabulary of " + std::to_string(vocabulary.size()) + " of " +
         std::to_string(vocabulary.vocab_size) + " ids does not fit this draft's head of " +
         std::to_string(config_.draft_vocab_size) + " rows over a target of " +
         std::to_string(config_.layer.vocab_size));
  vocabulary.check("the draft vocabulary");
  vocabulary_ = std::move(vocabulary);
}

Var Eagle3Draft::project(const Var& aux) const { return fc.forward(aux); }

Var Eagle3Draft::step(const Var& embeds, const Var& hidden, const Tensor& positions, TttKeys& keys,
                      const std::shared_ptr<const AttentionMask>& mask) const {
  return layer.forward(embeds, hidden, positions, keys, mask,
                       checkpointed_layer(checkpoint_every_, keys.steps()));
}

void Eagle3Draft::set_activation_checkpointing(int64_t every) {
  checkpointed_layer(every, 0);  // checks it
  checkpoint_every_ = every;
}

void check_eagle3_fits(const Eagle3Config& d, const QwenConfig& target, const std::string& label) {
  const int64_t deepest = *std::max_element(d.aux_layer_ids.begin(), d.aux_layer_ids.end());
  if (d.layer.hidden_size != target.hidden_size || d.layer.vocab_size != target.vocab_size ||
      deepest >= target.num_hidden_layers)
    throw std::invalid_argument(
        "[draft] " + label + " drafts for a target of hidden size " +
        std::to_string(d.layer.hidden_size) + " and vocabulary " +
        std::to_string(d.layer.vocab_size) + " with a layer " + std::to_string(deepest) +
        " (aux_layer_ids " + nlohmann::json(d.aux_layer_ids).dump() + "), not this one's " +
        std::to_string(target.hidden_size) + " and " + std::to_string(target.vocab_size) +
        " with " + std::to_string(target.num_hidden_layers) + " layers");
}

namespace {

// Where the draft of `dir` lies: `dir`, or the consolidated export inside a checkpoint of the
// reference's recipe (model/consolidated/).
std::string draft_files_dir(const std::string& dir) {
  const std::filesystem::path consolidated = std::filesystem::path(dir) / "model" / "consolidated";
  if (!std::filesystem::exists(std::filesystem::path(dir) / "config.json") &&
      std::filesystem::exists(consolidated / "config.json"))
    return consolidated.string();
  return dir;
}

// The engines' name of a tensor the reference saves under its module path: model.fc.weight ->
// fc.weight, model.layers.0.* -> midlayer.*, model.norm.weight -> norm.weight.
std::string serving_name(const std::string& name) {
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"model.layers.0.", "midlayer."}, {"model.", ""}})
    if (name.starts_with(from)) return to + name.substr(from.size());
  return name;
}

}  // namespace

bool is_eagle3_dir(const std::string& given) {
  const std::string dir = draft_files_dir(given);
  std::ifstream in(std::filesystem::path(dir) / "config.json");
  if (!in) return false;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object() || !j.contains("architectures") || !j["architectures"].is_array())
    return false;
  for (const nlohmann::json& a : j["architectures"])
    if (a.is_string() && std::find(kArchitectures.begin(), kArchitectures.end(),
                                   a.get<std::string>()) != kArchitectures.end())
      return true;
  return false;
}

Eagle3Config load_eagle3_config(const std::string& given) {
  const std::string path = model_config_path(draft_files_dir(given));
  check_input_file(path, "a draft config (config.json)");
  return Eagle3Config::from_json(read_json_file(path), path);
}

std::unique_ptr<Eagle3Draft> load_eagle3_draft(const std::string& given) {
  const std::string dir = draft_files_dir(given);
  Generator gen(0);
  auto draft = std::make_unique<Eagle3Draft>(load_eagle3_config(dir), gen);
  const Eagle3Config& c = draft->config();
  const WeightFiles weights(dir);
  // Each parameter's name in the files: the engines', or the reference's module path.
  const bool module_paths = weights.contains("model.fc.weight");
  std::map<std::string, std::string> stored;  // serving name -> name in the files
  for (const std::string& name : weights.names())
    stored[module_paths ? serving_name(name) : name] = name;
  std::map<std::string, Shape> expected;
  for (const auto& [name, p] : draft->named_parameters())
    expected[module_paths && stored.contains(name) ? stored[name] : name] = p.shape();
  check_tensors(weights, expected, dir + ": the draft's weights do not match its config.json",
                {"d2t", "t2d", module_paths ? "model.embed_tokens.weight" : "embed_tokens.weight"});
  warn_on_dtype_mismatch(weights, c.layer, dir, module_paths ? "model.fc.weight" : "fc.weight");
  std::map<std::string, Tensor> state;
  for (const auto& [name, p] : draft->named_parameters()) state[name] = weights.load(stored[name]);
  if (c.draft_vocab_size < c.layer.vocab_size) {
    if (!weights.contains("d2t"))
      throw std::runtime_error(
          dir + ": a draft of draft_vocab_size " + std::to_string(c.draft_vocab_size) + " of " +
          std::to_string(c.layer.vocab_size) + " needs d2t, the map of its ids to the target's");
    // The reference orders its ids by frequency: the head's rows follow its ids sorted.
    std::vector<int64_t> ids =
        weights.load("d2t").to(Device::cpu(), DType::i64).to_vector<int64_t>();
    if (static_cast<int64_t>(ids.size()) != c.draft_vocab_size)
      throw std::runtime_error(dir + "/d2t: " + std::to_string(ids.size()) +
                               " draft ids for a head of draft_vocab_size " +
                               std::to_string(c.draft_vocab_size));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] += static_cast<int64_t>(i);
    std::vector<int64_t> order(ids.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
    if (!std::is_sorted(ids.begin(), ids.end())) {
      state["lm_head.weight"] =
          index_select(state["lm_head.weight"], 0,
                       Tensor::from_vector(order, {static_cast<int64_t>(order.size())}));
      std::vector<int64_t> sorted;
      for (const int64_t i : order) sorted.push_back(ids[static_cast<size_t>(i)]);
      ids = std::move(sorted);
    }
    DraftVocabulary vocab;
    vocab.vocab_size = c.layer.vocab_size;
    vocab.draft_to_target = ids;
    const Tensor d2t = vocab.d2t();  // checked, and t2d against it
    draft->set_vocabulary(
        draft_vocabulary_of(d2t, weights.contains("t2d") ? weights.load("t2d") : Tensor(),
                            c.layer.vocab_size, dir + "/d2t"));
  }
  draft->load_state_dict(state);
  return draft;
}

}  // namespace sprig::speculative
