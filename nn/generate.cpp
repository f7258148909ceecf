#include "nn/generate.h"

#include <stdexcept>

namespace sprig {

namespace {

// Input for `count` new tokens at positions [past, past + count) over `past` cached keys:
// the new tokens see every cached key and each other causally.
QwenInput decode_input(const std::vector<int64_t>& ids, int64_t past, const QwenConfig& config,
                       Device device) {
  const int64_t count = static_cast<int64_t>(ids.size());
  std::vector<int64_t> pos(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) pos[static_cast<size_t>(i)] = past + i;
  auto mask_with_window = [&](int64_t window) {
    Mask m{count, past + count, {}};
    // Query row 0 sits at key position `past`: band_shift `past` from key 0, 0 from key `past`.
    if (past > 0) m.rects.push_back({0, count, 0, past, RectKind::full, window, past});
    m.rects.push_back({0, count, past, past + count, RectKind::causal, window, 0});
    return std::make_shared<AttentionMask>(compile_attention_mask(BatchMask(m)));
  };
  QwenInput in;
  in.input_ids = Tensor::from_vector(ids, {1, count}, device);
  in.position_ids = Tensor::from_vector(pos, {1, count}, device);
  in.mask = mask_with_window(0);
  int64_t window = 0;
  for (int64_t w : config.sliding_window_per_layer) window = std::max(window, w);
  if (window > 0) in.window_mask = mask_with_window(window);
  return in;
}

int64_t last_argmax(const QwenForCausalLM& model, const Var& hidden) {
  const int64_t T = hidden.size(1);
  const Var last = narrow(hidden, 1, T - 1, 1);  // (1, 1, H)
  return static_cast<int64_t>(argmax(model.logits(last).value().reshape({-1}), 0).item());
}

}  // namespace

std::vector<int64_t> generate_greedy(const QwenForCausalLM& model,
                                     const std::vector<int64_t>& prompt, int64_t max_new_tokens,
                                     int64_t stop_id) {
  if (prompt.empty()) throw std::invalid_argument("[generate] the prompt is empty");
  const QwenConfig& c = model.config();
  for (int64_t id : prompt)
    if (id < 0 || id >= c.vocab_size)
      throw std::invalid_argument("[generate] prompt id " + std::to_string(id) +
                                  " is outside the vocabulary [0, " +
                                  std::to_string(c.vocab_size) + ")");
  NoGradGuard no_grad;
  const Device device = model.head_weight().device();
  KVCache cache;
  std::vector<int64_t> out;
  std::vector<int64_t> next = prompt;
  while (static_cast<int64_t>(out.size()) < max_new_tokens) {
    const QwenInput in = decode_input(next, cache.length(), c, device);
    const int64_t token = last_argmax(model, model.hidden(in, &cache));
    out.push_back(token);
    if (token == stop_id) break;
    next = {token};
  }
  return out;
}

}  // namespace sprig
