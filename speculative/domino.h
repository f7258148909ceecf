// Domino drafts (docs/semantics.md §9.4): the DFlash backbone plus a correction head. A GRU reads
// the block's ground-truth tokens (teacher forcing) through the target's embedding, and
// silu(embed_proj.0([slot state | GRU state])) @ embed_proj.2^T is added to the base logits of the
// slots from the first corrected one on. The loss mixes the cross-entropies of the corrected
// (final) and the base logits by lambda_base, which a curriculum decays over training.
#pragma once

#include <cstdint>

#include "speculative/dflash.h"

namespace sprig::speculative {

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
