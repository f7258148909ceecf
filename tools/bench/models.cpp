#include "tools/bench/models.h"

namespace sprig::bench {

QwenConfig model_config(const std::string& name) {
  struct Shape {
    int64_t vocab, hidden, intermediate, layers, heads, kv_heads, head_dim;
    bool tied;
  };
  const auto qwen3 = [&name](const Shape& s) {
    return QwenConfig::from_json({{"model_type", "qwen3"},
                                  {"vocab_size", s.vocab},
                                  {"hidden_size", s.hidden},
                                  {"intermediate_size", s.intermediate},
                                  {"num_hidden_layers", s.layers},
                                  {"num_attention_heads", s.heads},
                                  {"num_key_value_heads", s.kv_heads},
                                  {"head_dim", s.head_dim},
                                  {"rope_theta", 1000000.0},
                                  {"tie_word_embeddings", s.tied},
                                  {"max_position_embeddings", 40960}},
                                 "bench model " + name);
  };
  if (name == "tiny") return qwen3({4096, 256, 768, 4, 4, 2, 64, false});
  if (name == "wide") return qwen3({32768, 1024, 3072, 4, 8, 4, 128, false});
  if (name == "qwen3-0.6b") return qwen3({151936, 1024, 3072, 28, 16, 8, 128, true});
  return QwenConfig::load(name);
}

}  // namespace sprig::bench
