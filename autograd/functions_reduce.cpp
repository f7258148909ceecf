// Differentiable reductions (sum, mean, max, logsumexp over one dim; sum/mean of all elements) and
// softmax / log_softmax. Each is its forward op followed by its backward.
#include "autograd/functions.h"

namespace sprig {

Var sum(const Var& x, int64_t dim, bool keepdim) {
  return record("sum", sum(x.value(), dim, keepdim), {x},
                [x_shape = x.shape(), dim, keepdim](const Tensor& dy) -> Grads {
                  return {sum_backward(dy, x_shape, dim, keepdim)};
                });
}

Var mean(const Var& x, int64_t dim, bool keepdim) {
  return record("mean", mean(x.value(), dim, keepdim), {x},
                [x_shape = x.shape(), dim, keepdim](const Tensor& dy) -> Grads {
                  return {mean_backward(dy, x_shape, dim, keepdim)};
                });
}

Var max(const Var& x, int64_t dim, bool keepdim) {
  const Tensor xv = x.value();
  const Tensor idx = needs_grad({x}) ? argmax(xv, dim, keepdim) : Tensor();
  return record("max", max(xv, dim, keepdim), {x},
                [xv, idx, dim, keepdim](const Tensor& dy) -> Grads {
                  return {max_backward(dy, xv, idx, dim, keepdim)};
                });
}

Var logsumexp(const Var& x, int64_t dim, bool keepdim) {
  const Tensor xv = x.value();
  const Tensor y = logsumexp(xv, dim, keepdim);
  return record("logsumexp", y, {x}, [xv, y, dim, keepdim](const Tensor& dy) -> Grads {
    return {logsumexp_backward(dy, xv, y, dim, keepdim)};
  });
}

Var sum_all(const Var& x) {
  return record("sum_all", sum_all(x.value()), {x},
                [x_shape = x.shape()](const Tensor& dy) -> Grads { return {dy.expand(x_shape)}; });
}

Var mean_all(const Var& x) {
  const double n = static_cast<double>(x.numel());
  return record(
      "mean_all", div(sum_all(x.value()), n), {x},
      [x_shape = x.shape(), n](const Tensor& dy) -> Grads { return {div(dy, n).expand(x_shape)}; });
}

Var softmax(const Var& x, int64_t dim) {
  const Tensor y = softmax(x.value(), dim);
  return record("softmax", y, {x},
                [y, dim](const Tensor& dy) -> Grads { return {softmax_backward(y, dy, dim)}; });
}

Var log_softmax(const Var& x, int64_t dim) {
  const Tensor y = log_softmax(x.value(), dim);
  return record("log_softmax", y, {x},
                [y, dim](const Tensor& dy) -> Grads { return {log_softmax_backward(y, dy, dim)}; });
}

}  // namespace sprig
