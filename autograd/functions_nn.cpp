// Differentiable matmul and the fused transformer ops (rms_norm, rope, swiglu, cross_entropy,
// kl_div): each a single node whose backward is the op's hand-written backward kernel.
#include "autograd/functions.h"

namespace sprig {

Var matmul(const Var& a, const Var& b, bool trans_a, bool trans_b) {
  const Tensor av = a.value(), bv = b.value();
  return record("matmul", matmul(av, bv, trans_a, trans_b), {a, b},
                [av, bv, trans_a, trans_b](const Tensor& dy) -> Grads {
                  auto [da, db] = matmul_backward(av, bv, dy, trans_a, trans_b);
                  return {da, db};
                });
}

Var rms_norm(const Var& x, const Var& w, double eps) {
  const Tensor xv = x.value(), wv = w.value();
  auto [y, rstd] = rms_norm(xv, wv, eps);
  // rstd = rstd: clang before 16 cannot capture a structured binding.
  return record("rms_norm", y, {x, w}, [xv, wv, rstd = rstd](const Tensor& dy) -> Grads {
    Tensor dw = Tensor::zeros(wv.shape(), wv.dtype(), wv.device());  // backward accumulates
    Tensor dx = rms_norm_backward(dy, xv, wv, rstd, dw);
    return {dx, dw};
  });
}

Var rope(const Var& x, const Tensor& pos, const RopeFrequencies& freqs) {
  return record("rope", rope(x.value(), pos, freqs), {x}, [pos, freqs](const Tensor& dy) -> Grads {
    return {rope_backward(dy, pos, freqs)};
  });
}

Var swiglu(const Var& gate, const Var& up) {
  const Tensor gv = gate.value(), uv = up.value();
  return record("swiglu", swiglu(gv, uv), {gate, up}, [gv, uv](const Tensor& dy) -> Grads {
    auto [dgate, dup] = swiglu_backward(gv, uv, dy);
    return {dgate, dup};
  });
}

Var cross_entropy(const Var& logits, const Tensor& targets, int64_t ignore_index) {
  const Tensor lv = logits.value();
  const CrossEntropyResult r = cross_entropy(lv, targets, ignore_index);
  return record("cross_entropy", r.loss, {logits},
                [lv, targets, lse = r.lse, ignore_index](const Tensor& dy) -> Grads {
                  return {cross_entropy_backward(dy, lv, targets, lse, ignore_index)};
                });
}

Var kl_div(const Var& student, const Tensor& teacher, double temperature) {
  const Tensor sv = student.value();
  const KLResult r = kl_div(teacher, sv, temperature);
  return record("kl_div", r.kl, {student},
                [teacher, sv, r, temperature](const Tensor& dy) -> Grads {
                  return {kl_div_backward(dy, teacher, sv, r, temperature)};
                });
}

}  // namespace sprig
