// swiglu and swiglu_backward: argument checks and dispatch to tensor/cpu/swiglu.cpp or
// tensor/cuda/swiglu.cu, in the inputs' own dtype.
#include "tensor/ops.h"
#include "tensor/ops/dispatch.h"

namespace sprig {

using detail::check_float_input;
using detail::check_same_device;
using detail::check_same_dtype;
using detail::check_shape;

namespace {

void check_swiglu(const char* op, const Tensor& gate, const Tensor& up) {
  check_float_input(op, gate, "gate");
  check_float_input(op, up, "up");
  check_shape(op, up, gate.shape(), "up");
  check_same_dtype(op, gate, up);
  check_same_device(op, {&gate, &up});
}

}  // namespace

Tensor swiglu(const Tensor& gate, const Tensor& up) {
  check_swiglu("swiglu", gate, up);
  Tensor out = Tensor::empty(gate.shape(), gate.dtype(), gate.device());
  if (out.numel() > 0)
    SPRIG_DISPATCH(gate.device(), swiglu, gate.contiguous(), up.contiguous(), out);
  return out;
}

std::pair<Tensor, Tensor> swiglu_backward(const Tensor& gate, const Tensor& up,
                                          const Tensor& dout) {
  const char* op = "swiglu_backward";
  check_swiglu(op, gate, up);
  check_float_input(op, dout, "dout");
  check_shape(op, dout, gate.shape(), "dout");
  check_same_dtype(op, gate, dout);
  check_same_device(op, {&gate, &dout});
  Tensor dgate = Tensor::empty(gate.shape(), gate.dtype(), gate.device());
  Tensor dup = Tensor::empty(gate.shape(), gate.dtype(), gate.device());
  if (gate.numel() > 0)
    SPRIG_DISPATCH(gate.device(), swiglu_backward, gate.contiguous(), up.contiguous(),
                   dout.contiguous(), dgate, dup);
  return {dgate, dup};
}

}  // namespace sprig
