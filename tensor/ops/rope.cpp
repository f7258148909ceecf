// rope and rope_backward (the transposed rotation): argument checks and dispatch to
// tensor/cpu/rope.cpp or tensor/cuda/rope.cu, in the input's own dtype.
#include <cmath>
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

Tensor rope_apply(const char* op, const Tensor& x, const Tensor& pos, const RopeFrequencies& freqs,
                  bool inverse) {
  check_float_input(op, x, "x");
  check_dim(op, x, 4, "x");
  check_defined(op, pos, "pos");
  check_index(op, pos, "pos");
  check_shape(op, pos, {x.size(0), x.size(1)}, "pos");
  check_same_device(op, {&x, &pos});
  if (x.size(3) % 2 != 0) fail(op, "head dim must be even, got " + std::to_string(x.size(3)));
  if (static_cast<int64_t>(freqs.inv_freq.size()) != x.size(3) / 2)
    fail(op, std::to_string(freqs.inv_freq.size()) + " frequencies for head dim " +
                 std::to_string(x.size(3)) + ": one per pair of dimensions");
  for (float f : freqs.inv_freq)
    if (!std::isfinite(f) || f < 0) fail(op, "inverse frequencies must be finite and >= 0");
  if (!(std::isfinite(freqs.attention_scaling) && freqs.attention_scaling > 0))
    fail(op,
         "attention_scaling must be finite and positive, got " + num_str(freqs.attention_scaling));
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (x.numel() > 0)
    SPRIG_DISPATCH(x.device(), rope, x.contiguous(), pos.contiguous(), y, freqs, inverse);
  return y;
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& pos, const RopeFrequencies& freqs) {
  return rope_apply("rope", x, pos, freqs, false);
}

Tensor rope_backward(const Tensor& dy, const Tensor& pos, const RopeFrequencies& freqs) {
  return rope_apply("rope_backward", dy, pos, freqs, true);
}

}  // namespace sprig
