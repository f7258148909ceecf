#include "attention/function.h"

namespace sprig {

Var attention(const Var& q, const Var& k, const Var& v,
              const std::shared_ptr<const AttentionMask>& mask, double scale) {
  AttentionOutput fwd = attention_forward(q.value(), k.value(), v.value(), *mask, scale);
  if (!needs_grad({q, k, v})) return Var(fwd.out);
  return record("attention", fwd.out, {q, k, v},
                [qt = q.value(), kt = k.value(), vt = v.value(), out = fwd.out, lse = fwd.lse, mask,
                 scale](const Tensor& dout) -> Grads {
                  AttentionGrads g = attention_backward(qt, kt, vt, out, lse, dout, *mask, scale);
                  return {g.dq, g.dk, g.dv};
                });
}

}  // namespace sprig
