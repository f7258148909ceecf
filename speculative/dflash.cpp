#include "speculative/dflash.h"

#include <algorithm>

#include "autograd/functions.h"

namespace sprig::speculative {

BlockOptions block_options(const DraftConfig& c) {
  BlockOptions o;
  o.block_size = c.block_size;
  o.mask_token_id = c.mask_token_id;
  o.causal = c.causal;
  o.sliding_window = c.sliding_window;
  return o;
}

DraftLoss dflash_loss(const FrozenTarget& target, const DFlashDraft& draft, const DraftRows& rows,
                      const Anchors& anchors, const ObjectiveOptions& options,
                      const Tensor& prefix_lengths, Tensor* logits) {
  const DraftConfig& c = draft.config();
  const Blocks blocks = make_blocks(rows, anchors, block_options(c), prefix_lengths);
  const Var& fc = draft.fc.weight;
  const Device device = fc.device();
  const DType dtype = fc.dtype();
  // The target's features and embeddings are constants of the draft's graph.
  const Var context(target.capture(rows, c.target_layer_ids).to(device, dtype));
  const Var noise(target.embed(blocks.noise_ids).value().to(device, dtype));
  const Var hidden = draft.forward(noise, context, blocks.positions.to(device), blocks.mask);
  const Var head(target.head().value().to(device, dtype));
  return draft_loss(hidden, head, blocks, options, prefix_lengths, logits);
}

double dflash_flops(const FrozenTarget& target, const DFlashDraft& draft, int64_t rows,
                    int64_t seq_len, int64_t blocks) {
  const DraftConfig& c = draft.config();
  const int64_t deepest = *std::max_element(c.target_layer_ids.begin(), c.target_layer_ids.end());
  const double context = static_cast<double>(rows * seq_len);
  const double slots = static_cast<double>(rows * blocks * c.block_size);
  const double head = static_cast<double>(target.config().vocab_size * c.layers.hidden_size);
  // 2 per parameter per token forward, 6 with backward; the head's backward skips dW.
  return 2.0 * static_cast<double>(target.parameters_up_to(deepest)) * context +
         6.0 * static_cast<double>(draft.num_parameters()) * slots + 4.0 * head * slots;
}

}  // namespace sprig::speculative
