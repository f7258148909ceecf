// A tiny Qwen2 config whose second layer slides (the model-input and batch-input tests use it).
#pragma once

#include <cstdint>

#include "nn/qwen_config.h"

namespace sprig::testing {

// 2 layers; layer 1 has a sliding window of `window` when window > 0 (layer 0 attends fully).
inline QwenConfig config_with_window(int64_t window) {
  return QwenConfig::from_json({{"model_type", "qwen2"},
                                {"vocab_size", 16},
                                {"hidden_size", 8},
                                {"intermediate_size", 8},
                                {"num_hidden_layers", 2},
                                {"num_attention_heads", 2},
                                {"use_sliding_window", window > 0},
                                {"sliding_window", window},
                                {"max_window_layers", 1}});
}

}  // namespace sprig::testing
