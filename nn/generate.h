// Greedy decoding with a KV cache: the prompt is encoded once, then each new token attends to
// the cached keys and values of every earlier token.
#pragma once

#include <functional>
#include <vector>

#include "nn/qwen.h"

namespace sprig {

// Returns the `max_new_tokens` greedily generated ids (fewer when `stop_id` >= 0 is produced;
// the stop id is included), calling `on_token` with each as it is produced. Positions past
// max_position_embeddings are computed as any other (callers apply nn/positions.h's rule first);
// a stop id must be in the vocabulary. The model's parameters may be on any device.
std::vector<int64_t> generate_greedy(const QwenForCausalLM& model,
                                     const std::vector<int64_t>& prompt, int64_t max_new_tokens,
                                     int64_t stop_id = -1,
                                     const std::function<void(int64_t)>& on_token = {});

}  // namespace sprig
