// rms_norm and rms_norm_backward: argument checks, outputs on the inputs' device, dispatch to
// tensor/cpu/norm.cpp or tensor/cuda/norm.cu. Kernels read every floating dtype natively, so inputs
// are only made contiguous, never converted.
#include <string>

#include "tensor/ops.h"
#include "tensor/ops/dispatch.h"

namespace sprig {

using detail::check_defined;
using detail::check_dim;
using detail::check_float_input;
using detail::check_same_device;
using detail::check_same_dtype;
using detail::check_shape;
using detail::check_stat;
using detail::fail;
using detail::stat_dtype;

namespace {

// Leading dimensions of x flattened: x viewed as [rows, x.size(-1)].
int64_t leading_rows(const Tensor& x) {
  return shape_numel(Shape(x.shape().begin(), x.shape().end() - 1));
}

// x (at least 1-D) and its weight [x.size(-1)], same dtype and device.
void check_rms_weight(const char* op, const Tensor& x, const Tensor& w) {
  check_float_input(op, x, "x");
  if (x.dim() < 1) fail(op, "x must have at least 1 dimension, got a 0-dim tensor");
  check_defined(op, w, "weight");
  check_same_device(op, {&x, &w});
  check_same_dtype(op, x, w);
  check_dim(op, w, 1, "weight");
  if (w.size(0) != x.size(-1))
    fail(op, "weight has " + std::to_string(w.size(0)) + " elements, x's last dimension is " +
                 std::to_string(x.size(-1)));
}

}  // namespace

std::pair<Tensor, Tensor> rms_norm(const Tensor& x, const Tensor& w, double eps) {
  const char* op = "rms_norm";
  check_rms_weight(op, x, w);
  const int64_t R = leading_rows(x), H = x.size(-1);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor rstd = Tensor::empty({R}, stat_dtype(x), x.device());
  if (R > 0)
    SPRIG_DISPATCH(x.device(), rms_norm, x.contiguous().view({R, H}), w.contiguous(),
                   y.view({R, H}), rstd, eps);
  return {y, rstd};
}

Tensor rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                         const Tensor& dw) {
  const char* op = "rms_norm_backward";
  check_rms_weight(op, x, w);
  check_float_input(op, dy, "dy");
  check_shape(op, dy, x.shape(), "dy");
  check_same_dtype(op, dy, x);
  const int64_t R = leading_rows(x), H = x.size(-1);
  check_stat(op, rstd, x, R, "rstd");
  check_float_input(op, dw, "dw");
  check_shape(op, dw, {H}, "dw");
  if (dw.dtype() != DType::f32 && dw.dtype() != w.dtype())
    fail(op, std::string("dw must be f32 or the weight's dtype ") + dtype_name(w.dtype()) +
                 ", got " + dtype_name(dw.dtype()));
  if (!dw.is_contiguous()) fail(op, "dw must be contiguous (it is accumulated in place)");
  check_same_device(op, {&x, &dy, &rstd, &dw});
  Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
  // No rows or no features: dx is empty and dw gains nothing (the kernels size their grids by R
  // and H, and would divide by them).
  if (R > 0 && H > 0)
    SPRIG_DISPATCH(x.device(), rms_norm_backward, dy.contiguous().view({R, H}),
                   x.contiguous().view({R, H}), w.contiguous(), rstd, dx.view({R, H}), dw);
  return dx;
}

}  // namespace sprig
