// One micro-batch of a DFlash-family draft end to end, shared by the trainers and the evaluator:
// the blocks of the given anchors, the frozen target's context features (and, for JetSpec, its
// logits), the draft's slot states, and the loss and metrics through the target's head. Domino
// and JetSpec add their objectives on the same forward (speculative/domino.h,
// speculative/jetspec.h).
#pragma once

#include "speculative/blocks.h"
#include "speculative/draft.h"
#include "speculative/objective.h"
#include "speculative/target.h"

namespace sprig::speculative {

// The block layout a draft config asks for (block size, mask token, causality, window; the
// kind's label shift, the shifted labels cut at the anchor's document end).
BlockOptions block_options(const DraftConfig& config);

// What the draft's forward over a micro-batch's blocks gives its objective.
struct BlockForward {
  Blocks blocks;
  Var hidden;  // (B, Q, H): the slots' final states
  // (Vd, H): the draft's head in its dtype and device, frozen: the target's LM head, or its rows of
  // the draft vocabulary (docs/semantics.md §9.10).
  Var head;
  // (B, N, bs) i64: blocks.target_ids as rows of `head` (draft ids), -1 for a token outside the
  // draft vocabulary: a slot no prediction of the draft can match, which no loss can score.
  Tensor labels;
  Tensor teacher_logits;  // (B, S, V) in the target's dtype, when asked for
};

// The target's features of `rows` and the draft's forward over `blocks` (made by make_blocks
// with block_options(draft.config())), in the draft parameters' dtype and device.
BlockForward block_forward(const FrozenTarget& target, const DFlashDraft& draft,
                           const DraftRows& rows, Blocks blocks, bool teacher_logits = false);

// The loss and metrics of `draft` on `rows` with `anchors` (and, for the variable-prefix loss,
// `prefix_lengths`). With `logits`, every slot's logits (B * Q, V) f32 on the CPU are returned
// too.
DraftLoss dflash_loss(const FrozenTarget& target, const DFlashDraft& draft, const DraftRows& rows,
                      const Anchors& anchors, const ObjectiveOptions& options,
                      const Tensor& prefix_lengths = {}, Tensor* logits = nullptr);

// Training FLOPs of that micro-batch (forward of the target's layers up to the deepest captured
// one, or all of them and the head when `teacher_logits`; forward and backward of the draft and
// of its head rows): for MFU.
double dflash_flops(const FrozenTarget& target, const DFlashDraft& draft, int64_t rows,
                    int64_t seq_len, int64_t blocks, bool teacher_logits = false);

}  // namespace sprig::speculative
