// Domino drafts (docs/semantics.md §9.4): the DFlash backbone plus a correction head. A GRU reads
// the block's ground-truth tokens (teacher forcing) through the target's embedding, and
// silu(embed_proj.0([slot state | GRU state])) @ embed_proj.2^T is added to the base logits of the
// slots from the first corrected one on. The loss mixes the cross-entropies of the corrected
// (final) and the base logits by lambda_base, which a curriculum decays over training.
#pragma once

#include <cstdint>
#include <memory>

#include "nn/layers.h"
#include "speculative/dflash.h"

namespace sprig::speculative {

// Domino's correction head (docs/semantics.md §9.4): `dflash_config.projector_type: domino`.
struct DominoHeadConfig {
  int64_t emb_dim = 256;              // E: the projection's width
  int64_t gru_hidden_dim = 1024;      // G: the GRU's state
  int64_t pure_draft_prefix_len = 1;  // p: leading slots left to the backbone alone
  bool shift_label = true;            // slot k predicts anchor + 1 + k (else anchor + k)

  // The first slot the head corrects: p with shift_label, 1 + p without.
  int64_t first_corrected_slot() const {
    return shift_label ? pure_draft_prefix_len : 1 + pure_draft_prefix_len;
  }
  bool operator==(const DominoHeadConfig&) const = default;
};

// The head of a draft config (DraftConfig::head, DraftOptions::head) with that shape, and the
// shape of a Domino draft's head (std::logic_error for a draft of another kind).
std::shared_ptr<const DraftHead> domino_head(const DominoHeadConfig& config);
const DominoHeadConfig& domino_head_config(const DraftConfig& draft);

// The head's modules: `prefix_gru`, `embed_proj.0` (H + G -> E) and `embed_proj.2` (E -> V).
class DominoHeadModule : public Module {
 public:
  DominoHeadModule(const DraftConfig& draft, const DominoHeadConfig& head, Generator& gen);
  // The logit correction features silu(embed_proj.0(concat(hidden, state))) (rows, E) of slot
  // states (rows, H) and GRU states (rows, G); the logits add them @ embed_proj.2^T.
  Var features(const Var& hidden, const Var& state) const;

  GRU& prefix_gru;
  Linear& embed_proj_in;
  Linear& embed_proj_out;
};
// A Domino draft's head (std::logic_error for a draft of another kind).
const DominoHeadModule& domino_head_module(const DFlashDraft& draft);

struct DominoOptions {
  double gamma = 7.0;        // decay of the slot weights; <= 0: none
  double lambda_base = 0.0;  // the base loss's weight in the mix
};

// The curriculum: start * (1 - min(step / max(1, int(total * ratio)), 1)), clamped to [0, 1];
// `step` counts the optimizer steps taken (docs/semantics.md E13).
double domino_lambda_base(int64_t step, int64_t total, double start, double decay_ratio);

// Slot k's decay weight: exp(-max(k - offset, 0) / gamma), offset 0 with shift_label, else 1.
double domino_slot_weight(int64_t slot, bool shift_label, double gamma);

// The base and corrected cross-entropies (2, N) f32 of the same rows, sharing one LM-head GEMM
// per chunk: base logits = hidden @ head^T, corrected = base + features @ proj^T, both losses from
// one pass over the base logits and their gradients written over them in another
// (corrected_cross_entropy in tensor/ops.h) (hidden (N, H), head (V, H), features (N, E), proj
// (V, E); targets (N), -100 ignored). One autograd node; the frozen head gets no gradient. With
// base_argmax / final_argmax, every row's argmax (N) i64.
Var domino_head_loss(const Var& hidden, const Var& head, const Var& features, const Var& proj,
                     const Tensor& targets, Tensor* base_argmax = nullptr,
                     Tensor* final_argmax = nullptr, int64_t chunk_rows = 0);

// The loss and metrics of a Domino `draft` on `rows` with `anchors`. With `logits`, every slot's
// corrected logits (B * Q, V) f32 on the CPU (the base logits where no correction applies).
DraftLoss domino_loss(const FrozenTarget& target, const DFlashDraft& draft, const DraftRows& rows,
                      const Anchors& anchors, const DominoOptions& options,
                      Tensor* logits = nullptr);

}  // namespace sprig::speculative
