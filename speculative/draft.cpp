#include "speculative/draft.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "autograd/functions.h"
#include "nn/checkpoint.h"
#include "speculative/blocks.h"
#include "speculative/draft_kind.h"
#include "tensor/input_file.h"
#include "tensor/json_text.h"

namespace sprig::speculative {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("[draft] " + message);
}

// Python's round() of a double: halves go to the even neighbour.
int64_t round_half_even(double x) {
  const double r = std::nearbyint(x);  // the default rounding mode rounds halves to even
  return static_cast<int64_t>(r);
}

}  // namespace

std::vector<int64_t> default_target_layer_ids(int64_t target_layers, int64_t draft_layers) {
  if (target_layers < 1 || draft_layers < 1)
    fail("the target and the draft need at least one layer each, got " +
         std::to_string(target_layers) + " and " + std::to_string(draft_layers));
  if (draft_layers == 1) return {target_layers / 2};
  const double start = 1, span = static_cast<double>(target_layers - 3) - start;
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < draft_layers; ++i)
    ids.push_back(round_half_even(start + static_cast<double>(i) * span /
                                              static_cast<double>(draft_layers - 1)));
  return ids;
}

int64_t DraftConfig::context_width() const {
  return static_cast<int64_t>(target_layer_ids.size()) * layers.hidden_size;
}

void DraftConfig::check() const {
  if (block_size < kMinBlockSize)
    fail("block_size must be >= " + std::to_string(kMinBlockSize) + ", got " +
         std::to_string(block_size));
  if (block_size > layers.max_position_embeddings)  // a block's slots are positions
    fail("block_size " + std::to_string(block_size) + " is more than max_position_embeddings " +
         std::to_string(layers.max_position_embeddings));
  if (mask_token_id < 0 || mask_token_id >= layers.vocab_size)
    fail("mask_token_id " + std::to_string(mask_token_id) +
         " is outside the target's vocabulary [0, " + std::to_string(layers.vocab_size) + ")");
  if (target_layer_ids.empty()) fail("target_layer_ids is empty");
  for (int64_t id : target_layer_ids)
    if (id < 0 || id >= num_target_layers)
      fail("target_layer_ids holds " + std::to_string(id) + ", outside the target's layers [0, " +
           std::to_string(num_target_layers) + ")");
  if (sliding_window < 0)
    fail("sliding_window must be >= 0, got " + std::to_string(sliding_window));
  if (draft_vocab_size < 0 || draft_vocab_size > layers.vocab_size)
    fail("draft_vocab_size must be in [1, " + std::to_string(layers.vocab_size) +
         "] (the target's vocabulary; 0 for the whole one), got " +
         std::to_string(draft_vocab_size));
  if (head) head->check(*this);
}

json DraftConfig::to_json(DType dtype) const {
  json j = layers.to_json();
  const int64_t n = layers.num_hidden_layers;
  j["architectures"] = {"DFlashDraftModel"};
  j["model_type"] = "qwen3";
  j["num_hidden_layers"] = n;
  j["block_size"] = block_size;
  j["num_target_layers"] = num_target_layers;
  j["layer_types"] = std::vector<std::string>(
      static_cast<size_t>(n), sliding_window > 0 ? "sliding_attention" : "full_attention");
  j["use_sliding_window"] = sliding_window > 0;
  j["sliding_window"] = sliding_window > 0 ? json(sliding_window) : json(nullptr);
  j["max_window_layers"] = n;
  j["is_causal"] = causal;
  j["dtype"] = j["torch_dtype"] = torch_dtype_name(dtype);  // transformers 5 reads one, 4 the other
  json& d = j["dflash_config"] = {{"block_size", block_size},
                                  {"mask_token_id", mask_token_id},
                                  {"target_layer_ids", target_layer_ids},
                                  {"causal", causal}};
  if (causal) d["causal_head"] = true;  // the key JetSpec's own engine reads
  if (reduced_vocab()) j["draft_vocab_size"] = draft_vocab_size;  // vLLM's lm_head and d2t
  if (head) head->write(j);
  return j;
}

DraftJsonReader::DraftJsonReader(const json& j, std::string label)
    : j_(j), label_(std::move(label)) {}

void DraftJsonReader::fail(const std::string& message) const {
  throw std::runtime_error(label_ + ": " + message);
}

namespace {

int64_t read_integer(const DraftJsonReader& r, const json& in, const char* key, const char* where) {
  if (!in.contains(key) || !in[key].is_number_integer())
    r.fail(std::string("\"") + where + key + "\" must be an integer");
  return in[key].get<int64_t>();
}

}  // namespace

int64_t DraftJsonReader::integer(const char* key) const { return read_integer(*this, j_, key, ""); }

int64_t DraftJsonReader::nested_integer(const char* key) const {
  return read_integer(*this, nested(), key, "dflash_config.");
}

int64_t DraftJsonReader::nested_or_top(const char* key) const {
  if (!nested().contains(key)) return integer(key);
  const int64_t v = nested_integer(key);
  if (j_.contains(key) && !j_[key].is_null() && integer(key) != v)
    fail(std::string("dflash_config.") + key + " is " + std::to_string(v) + " but the top-level " +
         key + " is " + j_[key].dump() + ": they must agree");
  return v;
}

std::optional<bool> DraftJsonReader::flag(const char* key, bool in_nested) const {
  const json& in = in_nested ? nested() : j_;
  if (!in.contains(key) || in[key].is_null()) return std::nullopt;
  if (!in[key].is_boolean())
    fail(std::string("\"") + (in_nested ? "dflash_config." : "") + key +
         "\" must be true or false, got " + in[key].dump());
  return in[key].get<bool>();
}

namespace {

// Refuses an `architectures` that names no DFlash-family draft class (absent is accepted): the
// engines' name, the reference's, or a kind's published one.
void check_architectures(const json& j, const DraftJsonReader& r) {
  if (!j.contains("architectures") || j["architectures"].is_null()) return;
  const json& a = j["architectures"];
  if (!a.is_array()) r.fail("\"architectures\" must be a list of class names, got " + a.dump());
  std::vector<std::string> known = {"DFlashDraftModel", "Qwen3DFlashDraftModel"};
  for (const DraftKind* kind : draft_kinds())
    for (std::string_view name : kind->architectures()) known.emplace_back(name);
  for (const json& name : a)
    if (name.is_string() && std::ranges::find(known, name.get<std::string>()) != known.end())
      return;
  for (const json& name : a)
    if (name.is_string() && name.get<std::string>().find("DFlash2") != std::string::npos)
      r.fail("architectures " + a.dump() +
             " is a DFlash 2 draft (convolution taps around each sublayer), which sprig does not "
             "support");
  std::string names;
  for (size_t i = 0; i < known.size(); ++i)
    names += (i == 0 ? "" : i + 1 == known.size() ? " or " : ", ") + known[i];
  r.fail("architectures " + a.dump() + " names no DFlash-family draft class (" + names + ")");
}

// The head dflash_config.projector_type names, read by the kind that has it.
std::shared_ptr<const DraftHead> read_head(const DraftJsonReader& r) {
  const json& type = r.nested()["projector_type"];
  std::string known;
  for (const DraftKind* kind : draft_kinds()) {
    if (kind->projector_type().empty()) continue;
    if (type == kind->projector_type()) return kind->read_head(r);
    known += (known.empty() ? "\"" : ", \"") + std::string(kind->projector_type()) + "\"";
  }
  r.fail("unknown \"dflash_config.projector_type\" " + type.dump() + " (sprig knows " + known +
         ", or none for a plain draft)");
}

}  // namespace

DraftConfig DraftConfig::from_json(const json& j, const std::string& label) {
  const DraftJsonReader r(j, label);
  if (!j.is_object()) r.fail("config must be a JSON object");
  if (!j.contains("dflash_config") || !j["dflash_config"].is_object())
    r.fail("has no \"dflash_config\": not a DFlash draft");
  check_architectures(j, r);
  const json& d = r.nested();
  DraftConfig c;
  c.block_size = r.nested_or_top("block_size");
  c.mask_token_id = r.nested_or_top("mask_token_id");
  if (!d.contains("target_layer_ids") || !d["target_layer_ids"].is_array())
    r.fail("\"dflash_config.target_layer_ids\" must be a list of layer ids");
  for (const json& id : d["target_layer_ids"]) {
    if (!id.is_number_integer()) r.fail("\"dflash_config.target_layer_ids\" holds " + id.dump());
    c.target_layer_ids.push_back(id.get<int64_t>());
  }
  c.num_target_layers = r.integer("num_target_layers");
  // In-block causality: dflash_config.causal says what the saving recipe meant (the reference's
  // JetSpec recipe stamps it, yet writes a top-level is_causal false on every draft); else the
  // top-level is_causal; else causal_head (JetSpec's engine). Keys that disagree are reported.
  const std::optional<bool> nested = r.flag("causal", true), top = r.flag("is_causal", false),
                            head = r.flag("causal_head", true);
  c.causal = nested.value_or(top.value_or(head.value_or(false)));
  const auto mode = [](bool causal) { return causal ? "in-block causal" : "bidirectional"; };
  if (top && *top != c.causal)
    std::cerr << label << ": warning: dflash_config.causal is " << std::boolalpha << c.causal
              << " but the top-level is_causal is " << *top << "; loading the draft as "
              << mode(c.causal) << ", as dflash_config.causal says. vLLM reads is_causal first "
              << "and would serve it " << mode(*top)
              << ": re-export it with `sprig convert --to-hf` to write both keys alike\n";
  if (head && *head != c.causal)
    std::cerr << label << ": warning: dflash_config.causal_head is " << std::boolalpha << *head
              << " but the draft loads as " << mode(c.causal)
              << "; JetSpec's engine reads causal_head and would serve it " << mode(*head) << "\n";
  if (j.contains("sliding_window") && j["sliding_window"].is_number_integer() &&
      j.value("use_sliding_window", false))
    c.sliding_window = j["sliding_window"].get<int64_t>();
  if (d.contains("projector_type") && !d["projector_type"].is_null()) c.head = read_head(r);
  if (j.contains("draft_vocab_size") && !j["draft_vocab_size"].is_null())
    c.draft_vocab_size = r.integer("draft_vocab_size");
  json layers = j;
  layers["architectures"] = {"Qwen3ForCausalLM"};
  if (layers.value("model_type", "") != "qwen3")
    r.fail("a DFlash draft's model_type must be qwen3");
  c.layers = QwenConfig::from_json(layers, label);
  for (const char* key : {"dflash_config", "auto_map", "draft_vocab_size"}) c.layers.raw.erase(key);
  if (c.draft_vocab_size == c.layers.vocab_size) c.draft_vocab_size = 0;  // the whole one
  if (c.head) {  // the head's top-level keys are its own, not the layers'
    json written;
    c.head->write(written);
    for (const auto& [key, value] : written.items()) c.layers.raw.erase(key);
  }
  try {
    c.check();
  } catch (const std::invalid_argument& e) {
    r.fail(e.what());
  }
  return c;
}

DraftConfig draft_config_for(const QwenConfig& target, const DraftOptions& o) {
  if (o.num_layers < 1) fail("num_layers must be >= 1, got " + std::to_string(o.num_layers));
  json j = target.to_json();
  for (const char* key : {"layer_types", "use_sliding_window", "sliding_window",
                          "max_window_layers", "bos_token_id", "eos_token_id", "auto_map"})
    j.erase(key);
  j["model_type"] = "qwen3";
  j["architectures"] = {"Qwen3ForCausalLM"};
  j["num_hidden_layers"] = o.num_layers;
  // The draft is a Qwen3 stack (q/k norms, no q/k/v biases) even over a Qwen2 target.
  j["attention_bias"] = false;
  if (o.num_attention_heads > 0) j["num_attention_heads"] = o.num_attention_heads;
  if (o.num_key_value_heads > 0) j["num_key_value_heads"] = o.num_key_value_heads;
  j["head_dim"] = o.head_dim > 0 ? o.head_dim : target.head_dim;
  if (o.num_attention_heads > 0 && o.num_key_value_heads == 0)
    j["num_key_value_heads"] = o.num_attention_heads;
  DraftConfig c;
  c.layers = QwenConfig::from_json(j, "[draft] config");
  c.block_size = o.block_size;
  c.mask_token_id = o.mask_token_id;
  c.num_target_layers = target.num_hidden_layers;
  c.target_layer_ids = o.target_layer_ids;
  if (c.target_layer_ids.empty()) {
    c.target_layer_ids = default_target_layer_ids(target.num_hidden_layers, o.num_layers);
    const auto outside = [&](int64_t id) { return id < 0 || id >= target.num_hidden_layers; };
    if (std::any_of(c.target_layer_ids.begin(), c.target_layer_ids.end(), outside))
      fail("the default target_layer_ids for " + std::to_string(o.num_layers) +
           " draft layers over a target of " + std::to_string(target.num_hidden_layers) +
           " layers would be " + json(c.target_layer_ids).dump() +
           ", outside the target's layers [0, " + std::to_string(target.num_hidden_layers) +
           "): set target_layer_ids (ids of target layers), or use fewer draft layers");
  }
  c.causal = o.causal;
  c.sliding_window = o.sliding_window;
  c.head = o.head;
  c.draft_vocab_size = o.draft_vocab_size < target.vocab_size ? o.draft_vocab_size : 0;
  if (o.mask_token_id < 0)
    fail(
        "mask_token_id is required: the token every non-anchor slot shows (an id of the "
        "target's vocabulary, e.g. Qwen3's first unused id 151669)");
  c.check();
  return c;
}

namespace {

// `c`, checked, once its parameters are known to fit in memory (nothing is allocated before).
DraftConfig fitting(DraftConfig c) {
  c.check();
  check_parameters_fit(c.parameter_parts(), "draft");
  return c;
}

}  // namespace

std::vector<ParameterPart> DraftConfig::parameter_parts() const {
  const auto key = [](const char* name, int64_t v) {
    return std::string(name) + " " + std::to_string(v);
  };
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  const int64_t H = layers.hidden_size, n = static_cast<int64_t>(target_layer_ids.size());
  std::vector<ParameterPart> parts = layers.parameter_parts(false);
  parts.push_back({d(n) * d(H) * d(H) + d(H),  // and the context's norm
                   "fc: " + std::to_string(n) + " target_layer_ids x " + key("hidden_size", H) +
                       " x " + key("hidden_size", H)});
  if (head)
    for (ParameterPart& part : head->parameter_parts(*this)) parts.push_back(std::move(part));
  if (reduced_vocab())
    parts.push_back(
        {d(draft_vocab_size) * d(H),
         "lm_head: " + key("draft_vocab_size", draft_vocab_size) + " x " + key("hidden_size", H)});
  return parts;
}

DFlashDraft::DFlashDraft(DraftConfig config, Generator& gen)
    : config_(fitting(std::move(config))),
      fc(register_module(
          "fc", std::make_unique<Linear>(config_.context_width(), config_.layers.hidden_size, false,
                                         config_.layers.initializer_range, gen))),
      hidden_norm(register_module(
          "hidden_norm",
          std::make_unique<RMSNorm>(config_.layers.hidden_size, config_.layers.rms_norm_eps))) {
  for (int64_t i = 0; i < config_.layers.num_hidden_layers; ++i)
    layers.push_back(&register_module("layers." + std::to_string(i),
                                      std::make_unique<QwenDecoderLayer>(config_.layers, i, gen)));
  norm = &register_module(
      "norm", std::make_unique<RMSNorm>(config_.layers.hidden_size, config_.layers.rms_norm_eps));
  if (config_.head) head_ = &register_module("", config_.head->build(config_, gen));
  if (!config_.reduced_vocab()) vocabulary_ = DraftVocabulary::whole(config_.layers.vocab_size);
}

void DFlashDraft::to(Device device, DType dtype) {
  Module::to(device, dtype);
  if (lm_head_.defined()) lm_head_ = lm_head_.to(device, dtype);
}

const DraftVocabulary& DFlashDraft::vocabulary() const {
  if (vocabulary_.size() != config_.vocab_rows())
    throw std::logic_error("[draft] a draft of draft_vocab_size " +
                           std::to_string(config_.draft_vocab_size) +
                           " has no vocabulary yet (set_vocabulary)");
  return vocabulary_;
}

void DFlashDraft::set_vocabulary(DraftVocabulary vocabulary, Tensor lm_head) {
  const int64_t rows = config_.vocab_rows(), H = config_.layers.hidden_size;
  if (vocabulary.vocab_size != config_.layers.vocab_size || vocabulary.size() != rows)
    fail("a draft vocabulary of " + std::to_string(vocabulary.size()) + " of " +
         std::to_string(vocabulary.vocab_size) +
         " ids does not fit this draft of draft_vocab_size " + std::to_string(rows) +
         " over a target of " + std::to_string(config_.layers.vocab_size));
  if (lm_head.shape() != Shape{rows, H})
    fail("the draft vocabulary's rows of the LM head are " + shape_str(lm_head.shape()) +
         ", expected (" + std::to_string(rows) + ", " + std::to_string(H) + ")");
  vocabulary.check("the draft vocabulary");
  vocabulary_ = std::move(vocabulary);
  lm_head_ = config_.reduced_vocab() ? std::move(lm_head) : Tensor();
}

std::map<std::string, Tensor> DFlashDraft::vocabulary_tensors() const {
  std::map<std::string, Tensor> out = vocabulary_.tensors();
  if (lm_head_.defined()) out["lm_head.weight"] = lm_head_;
  return out;
}

void DFlashDraft::extend_context(const Tensor& target_hidden, const Tensor& positions,
                                 KVCache& cache) const {
  const Var context = hidden_norm.forward(fc.forward(Var(target_hidden)));  // (1, m, H)
  for (const QwenDecoderLayer* layer : layers)
    layer->self_attn.append_keys_values(context, positions, cache);
}

Var DFlashDraft::decode_block(const Var& noise, const Tensor& positions, KVCache& cache) const {
  const int64_t S = cache.length(), Q = noise.size(1);
  // Query row 0 sits at key position S: the context rectangle's band starts there.
  Mask mask{Q, S + Q, {}};
  if (S > 0) mask.rects.push_back({0, Q, 0, S, RectKind::full, config_.sliding_window, S});
  mask.rects.push_back({0, Q, S, S + Q, config_.causal ? RectKind::causal : RectKind::full});
  const LayerInput in{positions, positions, compile_attention_mask(BatchMask(mask)), Var(), &cache};
  Var h = noise;
  for (const QwenDecoderLayer* layer : layers) h = layer->forward(h, in);
  cache.truncate(S);  // the block's own keys and values go
  return norm->forward(h);
}

Var DFlashDraft::forward(const Var& noise, const Var& target_hidden, const Tensor& positions,
                         const std::shared_ptr<const AttentionMask>& mask) const {
  const int64_t S = target_hidden.size(1), Q = noise.size(1);
  if (positions.dim() != 2 || positions.size(1) != S + Q)
    throw std::invalid_argument("[draft] positions " + shape_str(positions.shape()) +
                                " must be (B, S + Q) = (B, " + std::to_string(S + Q) + ")");
  // The context, projected once and shared by every layer: never updated across layers.
  const Var context = hidden_norm.forward(fc.forward(target_hidden));  // (B, S, H)
  const LayerInput in{positions.narrow(1, S, Q).contiguous(), positions, mask, context, nullptr};
  Var h = noise;  // (B, Q, H)
  for (size_t i = 0; i < layers.size(); ++i)
    h = checkpointed_layer(checkpoint_every_, static_cast<int64_t>(i))
            ? layers[i]->forward_checkpointed(h, in)
            : layers[i]->forward(h, in);
  return norm->forward(h);
}

void DFlashDraft::set_activation_checkpointing(int64_t every) {
  checkpointed_layer(every, 0);  // checks it
  checkpoint_every_ = every;
}

void check_draft_fits(const DraftConfig& d, const QwenConfig& target, const std::string& label) {
  const QwenConfig& l = d.layers;
  if (l.hidden_size != target.hidden_size || l.vocab_size != target.vocab_size ||
      d.num_target_layers != target.num_hidden_layers)
    fail(label + " drafts for a target of hidden size " + std::to_string(l.hidden_size) +
         ", vocabulary " + std::to_string(l.vocab_size) + " and " +
         std::to_string(d.num_target_layers) + " layers, not this one's " +
         std::to_string(target.hidden_size) + ", " + std::to_string(target.vocab_size) + " and " +
         std::to_string(target.num_hidden_layers));
}

bool is_draft_dir(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "config.json");
  if (!in) return false;
  const json j = json::parse(in, nullptr, false);
  return j.is_object() && j.contains("dflash_config");
}

DraftConfig load_draft_config(const std::string& dir) {
  const std::string path = model_config_path(dir);
  check_input_file(path, "a draft config (config.json)");
  if (!std::ifstream(path)) throw std::runtime_error(path + ": cannot open the draft's config");
  return DraftConfig::from_json(read_json_file(path), path);
}

std::unique_ptr<DFlashDraft> load_draft(const std::string& dir) {
  Generator gen(0);
  auto draft = std::make_unique<DFlashDraft>(load_draft_config(dir), gen);
  const WeightFiles weights(dir);
  const DraftConfig& c = draft->config();
  std::map<std::string, Shape> expected;
  for (const auto& [name, p] : draft->named_parameters()) expected[name] = p.shape();
  if (c.reduced_vocab()) expected["lm_head.weight"] = {c.draft_vocab_size, c.layers.hidden_size};
  check_tensors(
      weights, expected, dir + ": the draft's weights do not match its config.json",
      c.reduced_vocab() ? std::vector<std::string>{"d2t", "t2d"} : std::vector<std::string>{});
  warn_on_dtype_mismatch(weights, c.layers, dir, "fc.weight");
  if (c.reduced_vocab()) {
    if (!weights.contains("d2t"))
      throw std::runtime_error(
          dir + ": a draft of draft_vocab_size " + std::to_string(c.draft_vocab_size) + " of " +
          std::to_string(c.layers.vocab_size) + " needs d2t, the map of its ids to the target's");
    draft->set_vocabulary(
        draft_vocabulary_of(weights.load("d2t"),
                            weights.contains("t2d") ? weights.load("t2d") : Tensor(),
                            c.layers.vocab_size, dir + "/d2t"),
        weights.load("lm_head.weight").to(Device::cpu(), DType::f32));
    expected.erase("lm_head.weight");
  }
  std::map<std::string, Tensor> state;
  for (const auto& [name, shape] : expected) state[name] = weights.load(name);
  draft->load_state_dict(state);
  return draft;
}

}  // namespace sprig::speculative
