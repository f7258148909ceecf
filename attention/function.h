// The differentiable attention function on autograd Vars (docs/architecture.md §4): one node whose
// forward and backward are attention_forward / attention_backward over a mask compiled once per
// batch.
#pragma once

#include <memory>

#include "attention/attention.h"
#include "autograd/var.h"

namespace sprig {

// q (B, Tq, Hq, D), k and v (B, Tk, Hkv, D) -> (B, Tq, Hq, D); scores are scale * q.k. The graph
// keeps the mask alive until backward has run.
Var attention(const Var& q, const Var& k, const Var& v,
              const std::shared_ptr<const AttentionMask>& mask, double scale);

}  // namespace sprig
