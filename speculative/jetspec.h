// JetSpec drafts (docs/semantics.md §9.5): the DFlash backbone with in-block causal attention,
// distilled from the target. Slot k of a block (k >= 1) learns the target's own distribution for
// the token anchor + k, read from the target's logits at anchor + k - 1 in the same packed
// forward (document-local by construction), by forward KL at a temperature.
#pragma once

#include <cstdint>

#include "speculative/dflash.h"

namespace sprig::speculative {

struct JetSpecOptions {
  // T: the KL compares softmax(teacher / T) and softmax(student / T); the kind's kd_temperature
  // setting holds it in [0.01, 100].
  double temperature = 1.0;
  int64_t chunk_rows = 0;  // rows of logits per chunk (0: automatic); memory only
};

// The loss and metrics of a JetSpec `draft` on `rows` with `anchors`: T^2 * mean KL over the
// supervised slots, accuracy and acceptance against the teacher's argmax. Throws NoValidAnchors
// when no slot is supervised. With `logits`, every slot's logits (B * Q, V) f32 on the CPU.
DraftLoss jetspec_loss(const FrozenTarget& target, const DFlashDraft& draft, const DraftRows& rows,
                       const Anchors& anchors, const JetSpecOptions& options,
                       Tensor* logits = nullptr);

}  // namespace sprig::speculative
