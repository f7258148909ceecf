// QwenInput: what one forward pass of the Qwen model consumes, built in one place for every
// layout sprig trains, scores or decodes on: plain causal sequences, packed documents, prefix
// trees of folded rollouts, and decoding steps over a KV cache. A row's layout lives entirely in
// its per-token position ids and its attention masks: one for the full-attention layers and, when
// the model has sliding-window layers, one with that window (docs/semantics.md describes every
// mask). Each mask is compiled once per batch and shared by every layer.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "attention/attention_mask.h"
#include "nn/qwen_config.h"
#include "tensor/tensor.h"

namespace sprig {

struct QwenInput {
  Tensor input_ids;                                  // (B, T) i64
  Tensor position_ids;                               // (B, T) i64, RoPE phase of each token
  std::shared_ptr<const AttentionMask> mask;         // full-attention layers
  std::shared_ptr<const AttentionMask> window_mask;  // sliding-window layers, when the model has
  int64_t window = 0;                                // window_mask's window (0: there is none)

  // The mask of decoder layer `layer`, whose sliding window is `window` (0: full attention).
  // Throws "[qwen] layer N is windowed but the input has no window mask" (or names both windows
  // when they differ).
  const std::shared_ptr<const AttentionMask>& layer_mask(int64_t layer, int64_t window) const;
};

// Rows of plain causal sequences: input_ids (B, T), positions 0..T-1 in every row.
QwenInput causal_input(const Tensor& input_ids, const QwenConfig& config);

// Rows of packed documents: row b holds the documents doc_lens[b] in order (zero lengths are
// skipped; padding past their sum joins the last one), each causal on itself with its own
// positions (position_ids (B, T), restarting per document).
QwenInput documents_input(const Tensor& input_ids, const Tensor& position_ids,
                          const std::vector<std::vector<int64_t>>& doc_lens,
                          const QwenConfig& config);

// One folded rollout group: the prefix tree of attention/mask.h's prefix_tree_mask.
struct PrefixTree {
  std::vector<int64_t> node_lengths;
  std::vector<std::vector<int64_t>> sample_paths;
};

// Rows of prefix trees: row b holds trees[b] side by side, then num_pad[b] padding tokens as one
// causal block of their own. Sliding-window models are refused: a window over a tree is not
// defined.
QwenInput prefix_tree_input(const Tensor& input_ids, const Tensor& position_ids,
                            const std::vector<std::vector<PrefixTree>>& trees,
                            const std::vector<int64_t>& num_pad, const QwenConfig& config);

// One decoding step of one sequence: `ids` are new tokens at positions [past, past + n) over
// `past` cached keys; they see every cached key and each other causally (within the window on
// windowed layers).
QwenInput decode_input(const std::vector<int64_t>& ids, int64_t past, const QwenConfig& config,
                       Device device);

// A tree of candidate tokens over `past` cached keys (speculative decoding's tree verification):
// token i's parent is parents[i] (< i; -1 for a root), it sits at position past + its depth and
// sees every cached key, its ancestors and itself. Throws "[tree input] ..." for a parent that is
// not earlier, or a model with sliding-window layers (a window over a tree is not defined here).
QwenInput tree_input(const std::vector<int64_t>& ids, const std::vector<int64_t>& parents,
                     int64_t past, const QwenConfig& config, Device device);
// The mask rows of that tree: [n, past + n].
Mask tree_mask(const std::vector<int64_t>& parents, int64_t past);

}  // namespace sprig
