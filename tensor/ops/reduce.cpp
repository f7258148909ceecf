// Reductions over one dimension (sum, mean, max, argmax, logsumexp, sum_all), softmax /
// log_softmax, and their backward functions. Kernels see contiguous inputs and write the reduced
// shape; keepdim re-inserts the reduced dim as a size-1 view. On CPU, 16-bit floats compute in f32
// and the result is cast back to the input dtype.
#include <string>

#include "tensor/ops.h"
#include "tensor/ops/dispatch.h"

namespace sprig {

namespace {

// Checks a floating input and returns its normalised dim.
int64_t check_reduce_input(const char* op, const Tensor& x, int64_t dim) {
  detail::check_defined(op, x, "x");
  detail::check_floating(op, x, "x");
  return normalize_dim(dim, x.dim(), op);
}

// Maxima of an empty dimension are undefined.
void check_nonempty(const char* op, const Tensor& x, int64_t dim) {
  if (x.size(dim) == 0)
    detail::fail(op, "cannot reduce dim " + std::to_string(dim) + " of size 0 (shape " +
                         shape_str(x.shape()) + ")");
}

Shape without_dim(Shape shape, int64_t dim) {
  shape.erase(shape.begin() + dim);
  return shape;
}

Tensor run_reduce(ReduceOp op, const char* name, const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = check_reduce_input(name, x, dim);
  if (op == ReduceOp::max) check_nonempty(name, x, d);
  const Tensor xc = detail::for_compute(x);
  const Tensor out = Tensor::empty(without_dim(x.shape(), d), xc.dtype(), x.device());
  SPRIG_DISPATCH(x.device(), reduce, op, xc, out, d);
  const Tensor result = out.to(x.dtype());
  return keepdim ? result.unsqueeze(d) : result;
}

// t (x_shape reduced over dim, with or without keepdim) with the reduced dim kept as size 1.
Tensor kept_dim(const char* op, const Tensor& t, const char* name, const Shape& x_shape,
                int64_t dim, bool keepdim) {
  Shape kept = x_shape;
  kept[dim] = 1;
  detail::check_shape(op, t, keepdim ? kept : without_dim(x_shape, dim), name);
  return keepdim ? t : t.unsqueeze(dim);
}

int64_t check_backward_dim(const char* op, const Tensor& dy, const Shape& x_shape, int64_t dim) {
  detail::check_defined(op, dy, "dy");
  detail::check_floating(op, dy, "dy");
  return normalize_dim(dim, static_cast<int64_t>(x_shape.size()), op);
}

Tensor run_softmax(const char* op, const Tensor& x, int64_t dim, bool log) {
  const int64_t d = check_reduce_input(op, x, dim);
  const Tensor xc = detail::for_compute(x);
  const Tensor y = Tensor::empty(x.shape(), xc.dtype(), x.device());
  SPRIG_DISPATCH(x.device(), softmax, xc, y, d, log);
  return y.to(x.dtype());
}

Tensor run_softmax_backward(const char* op, const Tensor& y, const Tensor& dy, int64_t dim,
                            bool log) {
  const int64_t d = check_reduce_input(op, y, dim);
  detail::check_defined(op, dy, "dy");
  detail::check_same_device(op, {&y, &dy});
  detail::check_same_dtype(op, y, dy);
  detail::check_shape(op, dy, y.shape(), "dy");
  const Tensor yc = detail::for_compute(y), dyc = detail::for_compute(dy);
  const Tensor dx = Tensor::empty(y.shape(), yc.dtype(), y.device());
  SPRIG_DISPATCH(y.device(), softmax_backward, yc, dyc, dx, d, log);
  return dx.to(y.dtype());
}

}  // namespace

// ---- reductions ---------------------------------------------------------------------------------

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  return run_reduce(ReduceOp::sum, "sum", x, dim, keepdim);
}
Tensor mean(const Tensor& x, int64_t dim, bool keepdim) {
  return run_reduce(ReduceOp::mean, "mean", x, dim, keepdim);
}
Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  return run_reduce(ReduceOp::max, "max", x, dim, keepdim);
}
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim) {
  return run_reduce(ReduceOp::logsumexp, "logsumexp", x, dim, keepdim);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  const int64_t d = check_reduce_input("argmax", x, dim);
  check_nonempty("argmax", x, d);
  const Tensor out = Tensor::empty(without_dim(x.shape(), d), DType::i64, x.device());
  SPRIG_DISPATCH(x.device(), argmax, detail::for_compute(x), out, d);
  return keepdim ? out.unsqueeze(d) : out;
}

Tensor sum_all(const Tensor& x) { return sum(x.reshape({-1}), 0); }

// ---- reduction backward -------------------------------------------------------------------------

Tensor sum_backward(const Tensor& dy, const Shape& x_shape, int64_t dim, bool keepdim) {
  const char* op = "sum_backward";
  const int64_t d = check_backward_dim(op, dy, x_shape, dim);
  return kept_dim(op, dy, "dy", x_shape, d, keepdim).expand(x_shape).contiguous();
}

Tensor mean_backward(const Tensor& dy, const Shape& x_shape, int64_t dim, bool keepdim) {
  const char* op = "mean_backward";
  const int64_t d = check_backward_dim(op, dy, x_shape, dim);
  const Tensor scaled = div(kept_dim(op, dy, "dy", x_shape, d, keepdim), double(x_shape[d]));
  return scaled.expand(x_shape).contiguous();
}

Tensor max_backward(const Tensor& dy, const Tensor& x, const Tensor& argmax_idx, int64_t dim,
                    bool keepdim) {
  const char* op = "max_backward";
  const int64_t d = check_backward_dim(op, dy, x.shape(), dim);
  detail::check_defined(op, x, "x");
  detail::check_defined(op, argmax_idx, "argmax_idx");
  detail::check_same_device(op, {&dy, &x, &argmax_idx});
  // Each row's dy goes to its argmax: the backward of gathering x at argmax along dim.
  return gather_backward(kept_dim(op, dy, "dy", x.shape(), d, keepdim), x.shape(), d,
                         kept_dim(op, argmax_idx, "argmax_idx", x.shape(), d, keepdim));
}

Tensor logsumexp_backward(const Tensor& dy, const Tensor& x, const Tensor& y, int64_t dim,
                          bool keepdim) {
  const char* op = "logsumexp_backward";
  const int64_t d = check_backward_dim(op, dy, x.shape(), dim);
  detail::check_defined(op, x, "x");
  detail::check_defined(op, y, "y");
  detail::check_same_device(op, {&dy, &x, &y});
  detail::check_same_dtype(op, x, dy);
  detail::check_same_dtype(op, y, dy);
  const Tensor y_kept = kept_dim(op, y, "y", x.shape(), d, keepdim);
  return mul(kept_dim(op, dy, "dy", x.shape(), d, keepdim), exp(sub(x, y_kept)));
}

// ---- softmax ------------------------------------------------------------------------------------

Tensor softmax(const Tensor& x, int64_t dim) { return run_softmax("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) {
  return run_softmax("log_softmax", x, dim, true);
}
Tensor softmax_backward(const Tensor& y, const Tensor& dy, int64_t dim) {
  return run_softmax_backward("softmax_backward", y, dy, dim, false);
}
Tensor log_softmax_backward(const Tensor& y, const Tensor& dy, int64_t dim) {
  return run_softmax_backward("log_softmax_backward", y, dy, dim, true);
}

}  // namespace sprig
