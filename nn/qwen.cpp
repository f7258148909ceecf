#include "nn/qwen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>
#include <string>

#include "autograd/checkpoint.h"
#include "nn/loss.h"
#include "nn/positions.h"
#include "tensor/storage.h"

namespace sprig {

Tensor shift_labels(const Tensor& input_ids) {
  const int64_t B = input_ids.size(0), T = input_ids.size(1);
  Tensor labels = Tensor::full({B, T}, -100.0, DType::i64, input_ids.device());
  if (T > 1) labels.narrow(1, 0, T - 1).copy_(input_ids.narrow(1, 1, T - 1));
  return labels;
}

// ---- attention ------------------------------------------------------------------------------

namespace {
double init_std(const QwenConfig& c) { return c.initializer_range; }
}  // namespace

AttentionConfig AttentionConfig::of_layer(const QwenConfig& c, int64_t layer) {
  AttentionConfig a;
  a.hidden_size = c.hidden_size;
  a.num_heads = c.num_attention_heads;
  a.num_kv_heads = c.num_key_value_heads;
  a.head_dim = c.head_dim;
  a.sliding_window = c.sliding_window_per_layer.at(static_cast<size_t>(layer));
  a.rope = c.rope;
  a.rms_norm_eps = c.rms_norm_eps;
  a.qkv_bias = c.has_qkv_bias();
  a.o_bias = c.has_o_bias();
  a.qk_norm = c.has_qk_norm();
  return a;
}

QwenAttention::QwenAttention(const QwenConfig& c, int64_t layer, Generator& gen)
    : QwenAttention(AttentionConfig::of_layer(c, layer), c.hidden_size, layer, init_std(c), gen) {}

QwenAttention::QwenAttention(const AttentionConfig& a, int64_t input_size, int64_t layer,
                             double weight_std, Generator& gen)
    : q_proj(
          register_module("q_proj", std::make_unique<Linear>(input_size, a.num_heads * a.head_dim,
                                                             a.qkv_bias, weight_std, gen))),
      k_proj(register_module(
          "k_proj", std::make_unique<Linear>(input_size, a.num_kv_heads * a.head_dim, a.qkv_bias,
                                             weight_std, gen))),
      v_proj(register_module(
          "v_proj", std::make_unique<Linear>(input_size, a.num_kv_heads * a.head_dim, a.qkv_bias,
                                             weight_std, gen))),
      o_proj(register_module(
          "o_proj", std::make_unique<Linear>(a.num_heads * a.head_dim, a.hidden_size, a.o_bias,
                                             weight_std, gen))),
      config_(a),
      rope_(config_.rope.frequencies(config_.head_dim)),
      layer_(layer) {
  if (config_.qk_norm) {
    q_norm = &register_module("q_norm", std::make_unique<RMSNorm>(a.head_dim, a.rms_norm_eps));
    k_norm = &register_module("k_norm", std::make_unique<RMSNorm>(a.head_dim, a.rms_norm_eps));
  }
}

void KVCache::truncate(int64_t new_length) {
  if (new_length < 0 || new_length > length())
    throw std::invalid_argument("[kv cache] cannot keep " + std::to_string(new_length) +
                                " positions of " + std::to_string(length()));
  for (std::vector<Tensor>* entries : {&k, &v})
    for (Tensor& t : *entries)
      if (t.defined()) t = t.narrow(1, 0, new_length);
}

void KVCache::keep(int64_t from, const std::vector<int64_t>& rows) {
  if (from < 0 || from > length())
    throw std::invalid_argument("[kv cache] cannot keep positions after " + std::to_string(from) +
                                " of " + std::to_string(length()));
  std::vector<int64_t> index(static_cast<size_t>(from));
  std::iota(index.begin(), index.end(), 0);
  for (int64_t r : rows) {
    if (r < 0 || from + r >= length())
      throw std::invalid_argument("[kv cache] cannot keep position " + std::to_string(from + r) +
                                  " of " + std::to_string(length()));
    index.push_back(from + r);
  }
  for (std::vector<Tensor>* entries : {&k, &v})
    for (Tensor& t : *entries)
      if (t.defined())
        t = index_select(
            t, 1, Tensor::from_vector(index, {static_cast<int64_t>(index.size())}).to(t.device()));
}

RopeFrequencies QwenAttention::frequencies(const Tensor& positions) const {
  if (!config_.rope.depends_on_length() || positions.numel() == 0) return rope_;
  return config_.rope.frequencies(config_.head_dim, positions_end(positions));
}

std::pair<Var, Var> QwenAttention::keys_values(const Var& xkv, const Tensor& kv_pos,
                                               const RopeFrequencies& freqs) const {
  const int64_t B = xkv.size(0), Tk = xkv.size(1), D = config_.head_dim;
  const int64_t nKV = config_.num_kv_heads;
  Var k = reshape(k_proj.forward(xkv), {B, Tk, nKV, D});  // (B, Tk, nKV, D)
  Var v = reshape(v_proj.forward(xkv), {B, Tk, nKV, D});
  if (k_norm) k = k_norm->forward(k);  // Qwen3: per-head RMSNorm over D, before RoPE
  return {rope(k, kv_pos, freqs), v};
}

std::pair<Tensor, Tensor> QwenAttention::store(KVCache& cache, const Var& k, const Var& v) const {
  const auto index = static_cast<size_t>(layer_);
  if (cache.k.size() <= index) {
    cache.k.resize(index + 1);
    cache.v.resize(index + 1);
  }
  Tensor& ck = cache.k[index];
  Tensor& cv = cache.v[index];
  ck = ck.defined() ? concat({ck, k.value()}, 1) : k.value().contiguous();
  cv = cv.defined() ? concat({cv, v.value()}, 1) : v.value().contiguous();
  return {ck, cv};
}

void QwenAttention::append_keys_values(const Var& xkv, const Tensor& kv_pos, KVCache& cache) const {
  const auto [k, v] = keys_values(xkv, kv_pos, frequencies(kv_pos));
  store(cache, k, v);
}

Var QwenAttention::forward(const Var& xq, const Tensor& q_pos, const Var& xkv, const Tensor& kv_pos,
                           const std::shared_ptr<const AttentionMask>& mask, KVCache* cache) const {
  const int64_t B = xq.size(0), Tq = xq.size(1), D = config_.head_dim;
  Var q = reshape(q_proj.forward(xq), {B, Tq, config_.num_heads, D});  // (B, Tq, nH, D)
  if (q_norm) q = q_norm->forward(q);
  // Queries and keys turn by the same frequencies: those of every position this forward holds.
  const RopeFrequencies freqs = frequencies(kv_pos);
  q = rope(q, q_pos, freqs);
  auto [k, v] = keys_values(xkv, kv_pos, freqs);
  if (cache) {  // decoding: attend to [cached | new] keys, no graph
    const auto [ck, cv] = store(*cache, k, v);
    k = Var(ck);
    v = Var(cv);
  }
  return attend(q, k, v, mask);
}

QwenAttention::Projections QwenAttention::project(const Var& x, const Tensor& positions) const {
  const int64_t B = x.size(0), T = x.size(1);
  Var q = reshape(q_proj.forward(x), {B, T, config_.num_heads, config_.head_dim});
  if (q_norm) q = q_norm->forward(q);
  const RopeFrequencies freqs = frequencies(positions);
  auto [k, v] = keys_values(x, positions, freqs);
  return {rope(q, positions, freqs), k, v};
}

Var QwenAttention::attend(const Var& q, const Var& k, const Var& v,
                          const std::shared_ptr<const AttentionMask>& mask) const {
  const int64_t B = q.size(0), Tq = q.size(1), D = config_.head_dim;
  const Var a = attention(q, k, v, mask, 1.0 / std::sqrt(static_cast<double>(D)));
  return o_proj.forward(reshape(a, {B, Tq, config_.num_heads * D}));
}

// ---- decoder ----------------------------------------------------------------------------------

QwenDecoderLayer::QwenDecoderLayer(const QwenConfig& c, int64_t layer, Generator& gen)
    : self_attn(register_module("self_attn", std::make_unique<QwenAttention>(c, layer, gen))),
      mlp(register_module(
          "mlp", std::make_unique<QwenMLP>(c.hidden_size, c.intermediate_size, init_std(c), gen))),
      input_layernorm(register_module("input_layernorm",
                                      std::make_unique<RMSNorm>(c.hidden_size, c.rms_norm_eps))),
      post_attention_layernorm(register_module(
          "post_attention_layernorm", std::make_unique<RMSNorm>(c.hidden_size, c.rms_norm_eps))) {}

Var QwenDecoderLayer::forward(const Var& x, const LayerInput& in) const {
  const Var n = input_layernorm.forward(x);
  const Var kv = in.context.defined() ? concat({in.context, n}, 1) : n;
  Var h = x + self_attn.forward(n, in.q_pos, kv, in.kv_pos, in.mask, in.cache);
  return h + mlp.forward(post_attention_layernorm.forward(h));
}

Var QwenDecoderLayer::forward_checkpointed(const Var& x, const LayerInput& in) const {
  if (in.cache) throw std::invalid_argument("[checkpointing] a decoder layer with a KV cache");
  std::vector<Var> inputs = {x};
  if (in.context.defined()) inputs.push_back(in.context);
  return checkpoint(
      [this, in](const std::vector<Var>& v) {
        LayerInput with = in;
        if (v.size() > 1) with.context = v[1];
        return forward(v[0], with);
      },
      inputs, parameters());
}

bool checkpointed_layer(int64_t every, int64_t layer) {
  if (every < 0)
    throw std::invalid_argument("[checkpointing] every " + std::to_string(every) +
                                " layers: must be >= 0 (0: none)");
  return every > 0 && layer % every == 0;
}

QwenModel::QwenModel(const QwenConfig& c, Generator& gen)
    : embed_tokens(register_module(
          "embed_tokens",
          std::make_unique<Embedding>(c.vocab_size, c.hidden_size, init_std(c), gen))) {
  for (int64_t i = 0; i < c.num_hidden_layers; ++i)
    layers.push_back(&register_module("layers." + std::to_string(i),
                                      std::make_unique<QwenDecoderLayer>(c, i, gen)));
  norm = &register_module("norm", std::make_unique<RMSNorm>(c.hidden_size, c.rms_norm_eps));
}

void QwenModel::set_activation_checkpointing(int64_t every) {
  checkpointed_layer(every, 0);  // checks it
  checkpoint_every_ = every;
}

// Decoder layer `layer` over x, checkpointed when set and not decoding.
Var QwenModel::run_layer(size_t layer, const Var& x, const QwenInput& in, KVCache* cache) const {
  const QwenDecoderLayer& l = *layers[layer];
  const int64_t id = static_cast<int64_t>(layer);
  const LayerInput li{in.position_ids, in.position_ids,
                      in.layer_mask(id, l.self_attn.config().sliding_window), Var(), cache};
  return !cache && checkpointed_layer(checkpoint_every_, id) ? l.forward_checkpointed(x, li)
                                                             : l.forward(x, li);
}

Var QwenModel::forward(const QwenInput& in, KVCache* cache) const {
  Var x = embed_tokens.forward(in.input_ids);  // (B, T, H)
  for (size_t i = 0; i < layers.size(); ++i) x = run_layer(i, x, in, cache);
  return norm->forward(x);
}

std::vector<Var> QwenModel::layer_outputs(const QwenInput& in, const std::vector<int64_t>& ids,
                                          Var* final_hidden, KVCache* cache) const {
  const auto L = static_cast<int64_t>(layers.size());
  int64_t deepest = -1;
  for (int64_t id : ids) {
    if (id < 0 || id >= L)
      throw std::invalid_argument("[qwen] layer id " + std::to_string(id) + " is outside [0, " +
                                  std::to_string(L) + ")");
    deepest = std::max(deepest, id);
  }
  const int64_t last = final_hidden || cache ? L - 1 : deepest;
  std::vector<Var> out(ids.size());
  Var x = embed_tokens.forward(in.input_ids);  // (B, T, H)
  for (int64_t i = 0; i <= last; ++i) {
    x = run_layer(static_cast<size_t>(i), x, in, cache);
    for (size_t j = 0; j < ids.size(); ++j)
      if (ids[j] == i) out[j] = x;
  }
  if (final_hidden) *final_hidden = norm->forward(x);
  return out;
}

// ---- causal LM --------------------------------------------------------------------------------

void check_parameters_fit(const std::vector<ParameterPart>& parts, const std::string& who) {
  double total = 0;
  const ParameterPart* largest = &parts.at(0);
  for (const ParameterPart& p : parts) {
    total += p.count;
    if (p.count > largest->count) largest = &p;
  }
  const double available =
      static_cast<double>(cpu_memory_available()) + static_cast<double>(cpu_memory_allocated());
  if (total * sizeof(float) <= available) return;
  const auto gib = [](double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", bytes / (1024.0 * 1024.0 * 1024.0));
    return std::string(buf);
  };
  char count[32];
  std::snprintf(count, sizeof count, "%.3g", total);
  throw std::runtime_error("[" + who + "] " + count + " parameters need " +
                           gib(total * sizeof(float)) + " GiB in f32, more than the " +
                           gib(available) + " GiB of memory available; the largest part is " +
                           largest->sizes);
}

namespace {

QwenConfig fitting(QwenConfig c) {
  check_parameters_fit(c.parameter_parts(), "qwen");
  return c;
}

}  // namespace

QwenForCausalLM::QwenForCausalLM(QwenConfig config, Generator& gen)
    : config_(fitting(std::move(config))),
      model(register_module("model", std::make_unique<QwenModel>(config_, gen))) {
  if (!config_.tie_word_embeddings)
    lm_head = &register_module(
        "lm_head", std::make_unique<Linear>(config_.hidden_size, config_.vocab_size, false,
                                            init_std(config_), gen));
}

const Var& QwenForCausalLM::head_weight() const {
  return lm_head ? lm_head->weight : model.embed_tokens.weight;
}

Var QwenForCausalLM::logits(const Var& hidden) const {
  Shape out = hidden.shape();
  out.back() = config_.vocab_size;
  return reshape(matmul(reshape(hidden, {-1, config_.hidden_size}), head_weight(), false, true),
                 out);
}

Var QwenForCausalLM::token_losses(const Var& hidden, const Tensor& labels) const {
  const Var h = reshape(hidden, {-1, config_.hidden_size});  // (B*T, H)
  return linear_cross_entropy(h, head_weight(), labels.reshape({-1}));
}

Var QwenForCausalLM::token_losses(const Var& hidden, const std::vector<int64_t>& rows,
                                  const Tensor& targets, Tensor* entropy) const {
  const Var h = reshape(hidden, {-1, config_.hidden_size});
  return linear_cross_entropy_at(h, head_weight(), rows, targets, 0, entropy);
}

}  // namespace sprig
