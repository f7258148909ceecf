#include "nn/generate.h"

#include <stdexcept>
#include <string>

namespace sprig {

namespace {

int64_t last_argmax(const QwenForCausalLM& model, const Var& hidden) {
  const int64_t T = hidden.size(1);
  const Var last = narrow(hidden, 1, T - 1, 1);  // (1, 1, H)
  return static_cast<int64_t>(argmax(model.logits(last).value().reshape({-1}), 0).item());
}

}  // namespace

std::vector<int64_t> generate_greedy(const QwenForCausalLM& model,
                                     const std::vector<int64_t>& prompt, int64_t max_new_tokens,
                                     int64_t stop_id,
                                     const std::function<void(int64_t)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("[generate] the prompt is empty");
  const QwenConfig& c = model.config();
  if (max_new_tokens <= 0)
    throw std::invalid_argument("[generate] max_new_tokens must be >= 1, got " +
                                std::to_string(max_new_tokens));
  if (stop_id >= c.vocab_size)
    throw std::invalid_argument("[generate] stop id " + std::to_string(stop_id) +
                                " is outside the vocabulary [0, " + std::to_string(c.vocab_size) +
                                ")");
  for (int64_t id : prompt)
    if (id < 0 || id >= c.vocab_size)
      throw std::invalid_argument("[generate] prompt id " + std::to_string(id) +
                                  " is outside the vocabulary [0, " + std::to_string(c.vocab_size) +
                                  ")");
  NoGradGuard no_grad;
  const Device device = model.head_weight().device();
  KVCache cache;
  std::vector<int64_t> out;
  std::vector<int64_t> next = prompt;
  while (static_cast<int64_t>(out.size()) < max_new_tokens) {
    const QwenInput in = decode_input(next, cache.length(), c, device);
    const int64_t token = last_argmax(model, model.hidden(in, &cache));
    out.push_back(token);
    if (on_token) on_token(token);
    if (token == stop_id) break;
    next = {token};
  }
  return out;
}

}  // namespace sprig
