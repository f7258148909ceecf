// The frozen target of draft training (docs/semantics.md §7.1): a Qwen model run without a graph
// that captures the residual stream after the draft's target layers, concatenated on the feature
// axis, and lends the draft its token embedding and LM head. Packed rows run with the document
// mask and per-document positions, so no document sees another; unpacked rows run causally with
// positions 0..S-1.
#pragma once

#include <memory>
#include <vector>

#include "nn/qwen.h"
#include "speculative/blocks.h"

namespace sprig::speculative {

class FrozenTarget {
 public:
  // Takes the model (f32 on the CPU), moves it to `device` in `dtype` and freezes it.
  FrozenTarget(std::unique_ptr<QwenForCausalLM> model, Device device, DType dtype);

  const QwenForCausalLM& model() const { return *model_; }
  const QwenConfig& config() const { return model_->config(); }
  Device device() const { return device_; }

  // The hidden states (B, S, len(layers) * H) after each decoder layer of `layers` (in that
  // order), in the target's dtype on its device. With `logits`, the whole forward runs and the
  // target's logits (B, S, V) are returned there too (drafts distilled from the target's
  // distribution read them).
  Tensor capture(const DraftRows& rows, const std::vector<int64_t>& layers,
                 Tensor* logits = nullptr) const;
  // Token embeddings (..., H) of `ids`, frozen.
  Var embed(const Tensor& ids) const;
  // The LM head (V, H), frozen.
  const Var& head() const { return model_->head_weight(); }
  int64_t parameters_up_to(int64_t layer) const;  // embedding + layers [0, layer]

 private:
  std::unique_ptr<QwenForCausalLM> model_;
  Device device_;
};

}  // namespace sprig::speculative
