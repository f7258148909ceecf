#include "nn/loss.h"

#include <algorithm>
#include <stdexcept>

#include "tensor/ops.h"

namespace sprig {

namespace {
int64_t rows_per_chunk(int64_t requested, int64_t vocab) {
  if (requested > 0) return requested;
  return std::max<int64_t>(1, (int64_t{1} << 25) / std::max<int64_t>(vocab, 1));
}
}  // namespace

Var linear_cross_entropy(const Var& hidden, const Var& weight, const Tensor& targets,
                         int64_t ignore_index, int64_t chunk_rows) {
  const int64_t N = hidden.size(0), V = weight.size(0);
  if (hidden.dim() != 2 || weight.dim() != 2 || hidden.size(1) != weight.size(1))
    throw std::invalid_argument("[linear_cross_entropy] hidden " + shape_str(hidden.shape()) +
                                " and weight " + shape_str(weight.shape()) +
                                " must be (N, H) and (V, H)");
  if (targets.dim() != 1 || targets.size(0) != N)
    throw std::invalid_argument("[linear_cross_entropy] targets must be (" + std::to_string(N) +
                                "), got " + shape_str(targets.shape()));
  const int64_t chunk = rows_per_chunk(chunk_rows, V);
  const Tensor h = hidden.value(), w = weight.value();
  const DType acc = h.dtype() == DType::f64 ? DType::f64 : DType::f32;  // as cross_entropy's
  Tensor loss = Tensor::empty({N}, acc, h.device());
  Tensor lse = Tensor::empty({N}, acc, h.device());
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t n = std::min(chunk, N - r0);
    const Tensor logits = matmul(h.narrow(0, r0, n), w, false, true);  // (n, V)
    CrossEntropyResult ce = cross_entropy(logits, targets.narrow(0, r0, n), ignore_index);
    loss.narrow(0, r0, n).copy_(ce.loss);
    lse.narrow(0, r0, n).copy_(ce.lse);
  }
  return record("linear_cross_entropy", loss, {hidden, weight},
                [h, w, targets, lse, chunk, ignore_index](const Tensor& dloss) -> Grads {
                  const int64_t rows = h.size(0);
                  Tensor dh = Tensor::empty(h.shape(), h.dtype(), h.device());
                  Tensor dw = Tensor::zeros(w.shape(), w.dtype(), w.device());
                  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
                    const int64_t n = std::min(chunk, rows - r0);
                    const Tensor hc = h.narrow(0, r0, n);
                    const Tensor logits = matmul(hc, w, false, true);
                    const Tensor dlogits = cross_entropy_backward(
                        dloss.narrow(0, r0, n), logits, targets.narrow(0, r0, n),
                        lse.narrow(0, r0, n), ignore_index);
                    dh.narrow(0, r0, n).copy_(matmul(dlogits, w));
                    dw = add(dw, matmul(dlogits, hc, true, false));
                  }
                  return {dh, dw};
                });
}

}  // namespace sprig
