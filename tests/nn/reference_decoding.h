// Greedy decoding by repeated full forwards (no KV cache): the reference that cached decoding,
// in the library and through `sprig generate`, must reproduce.
#pragma once

#include <vector>

#include "nn/qwen.h"

namespace sprig::testing {

// The `steps` ids that argmax decoding appends to `seq`, each from a forward over the whole
// sequence so far.
inline std::vector<int64_t> reference_greedy(const QwenForCausalLM& model, std::vector<int64_t> seq,
                                             int64_t steps) {
  NoGradGuard no_grad;
  std::vector<int64_t> out;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t T = static_cast<int64_t>(seq.size());
    const Tensor ids = Tensor::from_vector(seq, {1, T});
    const Tensor logits = model.logits(model.hidden(causal_input(ids, model.config()))).value();
    const int64_t next =
        static_cast<int64_t>(argmax(logits.select(1, T - 1).reshape({-1}), 0).item());
    out.push_back(next);
    seq.push_back(next);
  }
  return out;
}

}  // namespace sprig::testing
