// One DFlash micro-batch end to end, shared by the trainer and the evaluator: the blocks of the
// given anchors, the frozen target's context features, the draft's slot states, and the loss and
// metrics through the target's head.
#pragma once

#include "speculative/blocks.h"
#include "speculative/draft.h"
#include "speculative/objective.h"
#include "speculative/target.h"

namespace sprig::speculative {

// The block layout a draft config asks for (block size, mask token, causality, window).
BlockOptions block_options(const DraftConfig& config);

// The loss and metrics of `draft` on `rows` with `anchors` (and, for the variable-prefix loss,
// `prefix_lengths`). The draft computes in its parameters' dtype and device; with `logits`, every
// slot's logits (B * Q, V) f32 on the CPU are returned too.
DraftLoss dflash_loss(const FrozenTarget& target, const DFlashDraft& draft, const DraftRows& rows,
                      const Anchors& anchors, const ObjectiveOptions& options,
                      const Tensor& prefix_lengths = {}, Tensor* logits = nullptr);

// Training FLOPs of that micro-batch (forward of the target's layers up to the deepest captured
// one; forward and backward of the draft and of its head rows): for MFU.
double dflash_flops(const FrozenTarget& target, const DFlashDraft& draft, int64_t rows,
                    int64_t seq_len, int64_t blocks);

}  // namespace sprig::speculative
