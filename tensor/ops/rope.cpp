// rope and rope_backward (the inverse rotation): argument checks and dispatch to
// tensor/cpu/rope.cpp or tensor/cuda/rope.cu, in the input's own dtype.
#include <string>

#include "tensor/ops.h"
#include "tensor/ops/dispatch.h"

namespace sprig {

using detail::check_defined;
using detail::check_dim;
using detail::check_float_input;
using detail::check_index;
using detail::check_same_device;
using detail::check_shape;
using detail::fail;
using detail::num_str;

namespace {

Tensor rope_apply(const char* op, const Tensor& x, const Tensor& pos, double theta, bool inverse) {
  check_float_input(op, x, "x");
  check_dim(op, x, 4, "x");
  check_defined(op, pos, "pos");
  check_index(op, pos, "pos");
  check_shape(op, pos, {x.size(0), x.size(1)}, "pos");
  check_same_device(op, {&x, &pos});
  if (x.size(3) % 2 != 0) fail(op, "head dim must be even, got " + std::to_string(x.size(3)));
  if (!(theta > 0)) fail(op, "theta must be positive, got " + num_str(theta));
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.numel() > 0)
    SPRIG_DISPATCH(x.device(), rope, x.contiguous(), pos.contiguous(), y, theta, inverse);
  return y;
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& pos, double theta) {
  return rope_apply("rope", x, pos, theta, false);
}

Tensor rope_backward(const Tensor& dy, const Tensor& pos, double theta) {
  return rope_apply("rope_backward", dy, pos, theta, true);
}

}  // namespace sprig
