// Losses over the LM head that never hold a (rows, V) logits tensor for the whole batch.
#pragma once

#include "autograd/var.h"

namespace sprig {

// Per-row cross-entropy of (hidden @ weight^T) against targets: hidden (N, H), weight (V, H),
// targets (N) (ignore_index rows give 0 and no gradient) -> (N) f32 (f64 for f64 inputs). One
// autograd node: forward runs row chunks of at most `chunk_rows` (0: chosen so a chunk's logits
// stay near 32M elements) and keeps only each row's log-sum-exp; backward recomputes each chunk's
// logits.
Var linear_cross_entropy(const Var& hidden, const Var& weight, const Tensor& targets,
                         int64_t ignore_index = -100, int64_t chunk_rows = 0);

}  // namespace sprig
