#include "nn/qwen_input.h"

#include <functional>
#include <stdexcept>
#include <string>

namespace sprig {

namespace {

// The input of ids and positions whose rows' masks `row_masks(window)` gives: the full mask, and
// the windowed one when the model has sliding-window layers.
QwenInput make_input(const Tensor& input_ids, const Tensor& position_ids,
                     const std::function<BatchMask(int64_t window)>& row_masks,
                     const QwenConfig& config) {
  QwenInput in;
  in.input_ids = input_ids;
  in.position_ids = position_ids;
  in.mask = compile_attention_mask(row_masks(0));
  in.window = config.sliding_window();
  if (in.window > 0) in.window_mask = compile_attention_mask(row_masks(in.window));
  return in;
}

void check_rows(const char* builder, const Tensor& input_ids, const Tensor& position_ids,
                size_t rows) {
  if (input_ids.dim() != 2)
    throw std::invalid_argument(std::string("[") + builder + "] input_ids must be (B, T), got " +
                                shape_str(input_ids.shape()));
  if (position_ids.shape() != input_ids.shape())
    throw std::invalid_argument(std::string("[") + builder + "] position_ids " +
                                shape_str(position_ids.shape()) + " must have input_ids' shape " +
                                shape_str(input_ids.shape()));
  if (static_cast<int64_t>(rows) != input_ids.size(0))
    throw std::invalid_argument(std::string("[") + builder + "] " + std::to_string(rows) +
                                " row layouts for " + std::to_string(input_ids.size(0)) + " rows");
}

}  // namespace

const std::shared_ptr<const AttentionMask>& QwenInput::layer_mask(int64_t layer,
                                                                  int64_t layer_window) const {
  if (layer_window == 0) return mask;
  if (!window_mask)
    throw std::invalid_argument("[qwen] layer " + std::to_string(layer) +
                                " is windowed but the input has no window mask");
  if (window != layer_window)
    throw std::invalid_argument(
        "[qwen] layer " + std::to_string(layer) + " has window " + std::to_string(layer_window) +
        " but the input's window mask has window " + std::to_string(window));
  return window_mask;
}

QwenInput causal_input(const Tensor& input_ids, const QwenConfig& config) {
  if (input_ids.dim() != 2)
    throw std::invalid_argument("[causal_input] input_ids must be (B, T), got " +
                                shape_str(input_ids.shape()));
  const int64_t B = input_ids.size(0), T = input_ids.size(1);
  const Tensor positions =
      Tensor::arange(T, DType::i64, input_ids.device()).unsqueeze(0).expand({B, T}).contiguous();
  return make_input(
      input_ids, positions, [T](int64_t window) { return BatchMask(causal_mask(T, window)); },
      config);
}

QwenInput documents_input(const Tensor& input_ids, const Tensor& position_ids,
                          const std::vector<std::vector<int64_t>>& doc_lens,
                          const QwenConfig& config) {
  check_rows("documents_input", input_ids, position_ids, doc_lens.size());
  const int64_t T = input_ids.size(1);
  return make_input(
      input_ids, position_ids,
      [&](int64_t window) {
        std::vector<Mask> rows;
        for (const std::vector<int64_t>& lens : doc_lens)
          rows.push_back(document_mask(lens, T, window));
        return BatchMask(rows);
      },
      config);
}

QwenInput prefix_tree_input(const Tensor& input_ids, const Tensor& position_ids,
                            const std::vector<std::vector<PrefixTree>>& trees,
                            const std::vector<int64_t>& num_pad, const QwenConfig& config) {
  check_rows("prefix_tree_input", input_ids, position_ids, trees.size());
  if (num_pad.size() != trees.size())
    throw std::invalid_argument("[prefix_tree_input] " + std::to_string(num_pad.size()) +
                                " padding counts for " + std::to_string(trees.size()) + " rows");
  if (config.sliding_window() > 0)
    throw std::invalid_argument(
        "[prefix_tree_input] prefix trees cannot feed a sliding-window model (window " +
        std::to_string(config.sliding_window()) + ")");
  return make_input(
      input_ids, position_ids,
      [&](int64_t) {
        std::vector<Mask> rows;
        for (size_t b = 0; b < trees.size(); ++b) {
          std::vector<Mask> parts;
          for (const PrefixTree& t : trees[b])
            parts.push_back(prefix_tree_mask(t.node_lengths, t.sample_paths));
          if (num_pad[b] > 0) parts.push_back(causal_mask(num_pad[b]));
          rows.push_back(block_diagonal(parts));
        }
        return BatchMask(rows);
      },
      config);
}

QwenInput decode_input(const std::vector<int64_t>& ids, int64_t past, const QwenConfig& config,
                       Device device) {
  const int64_t count = static_cast<int64_t>(ids.size());
  std::vector<int64_t> pos(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) pos[static_cast<size_t>(i)] = past + i;
  return make_input(
      Tensor::from_vector(ids, {1, count}, device), Tensor::from_vector(pos, {1, count}, device),
      [&](int64_t window) {
        Mask m{count, past + count, {}};
        // Query row 0 sits at key position `past`: band_shift `past` from key 0, 0 from `past`.
        if (past > 0) m.rects.push_back({0, count, 0, past, RectKind::full, window, past});
        m.rects.push_back({0, count, past, past + count, RectKind::causal, window, 0});
        return BatchMask(m);
      },
      config);
}

Mask tree_mask(const std::vector<int64_t>& parents, int64_t past) {
  const auto n = static_cast<int64_t>(parents.size());
  Mask m{n, past + n, {}};
  if (past > 0) m.rects.push_back({0, n, 0, past});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i; j >= 0; j = parents[static_cast<size_t>(j)]) {
      if (parents[static_cast<size_t>(j)] >= j)
        throw std::invalid_argument("[tree input] token " + std::to_string(j) + "'s parent " +
                                    std::to_string(parents[static_cast<size_t>(j)]) +
                                    " is not an earlier token");
      m.rects.push_back({i, i + 1, past + j, past + j + 1});
    }
  return m;
}

QwenInput tree_input(const std::vector<int64_t>& ids, const std::vector<int64_t>& parents,
                     int64_t past, const QwenConfig& config, Device device) {
  if (ids.size() != parents.size())
    throw std::invalid_argument("[tree input] " + std::to_string(ids.size()) + " tokens and " +
                                std::to_string(parents.size()) + " parents");
  if (config.sliding_window() > 0)
    throw std::invalid_argument(
        "[tree input] a model with sliding-window layers cannot verify a tree of tokens");
  const Mask mask = tree_mask(parents, past);
  std::vector<int64_t> pos(ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    pos[i] = parents[i] < 0 ? past : pos[static_cast<size_t>(parents[i])] + 1;
  const auto count = static_cast<int64_t>(ids.size());
  return make_input(
      Tensor::from_vector(ids, {1, count}, device), Tensor::from_vector(pos, {1, count}, device),
      [&](int64_t) { return BatchMask(mask); }, config);
}

}  // namespace sprig
