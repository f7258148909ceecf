// Optimizer ops: global gradient norm, norm clipping (torch.nn.utils.clip_grad_norm_ semantics)
// and the in-place AdamW step (torch.optim.AdamW). Kernels in tensor/cpu/optim.cpp and
// tensor/cuda/optim.cu; the clipping scale reuses the in-place binary_scalar kernel.
#include <cmath>
#include <string>

#include "tensor/ops.h"
#include "tensor/ops/dispatch.h"

namespace sprig {

using detail::check_defined;
using detail::check_floating;
using detail::check_same_device;
using detail::check_shape;
using detail::fail;

double global_norm(const std::vector<Tensor>& tensors) {
  const char* op = "global_norm";
  if (tensors.empty()) return 0.0;
  const Device dev = tensors[0].device();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = "tensor " + std::to_string(i);
    check_defined(op, tensors[i], name.c_str());
    check_floating(op, tensors[i], name.c_str());
    if (tensors[i].device() != dev)
      fail(op, name + " is on " + tensors[i].device().str() + ", tensor 0 on " + dev.str());
  }
  // One partial sum per tensor in a small accumulator on the device, read back once.
  const int64_t n = static_cast<int64_t>(tensors.size());
  Tensor partial = Tensor::empty({n}, dev.is_cpu() ? DType::f64 : DType::f32, dev);
  for (int64_t i = 0; i < n; ++i)
    SPRIG_DISPATCH(dev, sum_squares, tensors[i].contiguous(), partial.narrow(0, i, 1));
  double total = 0;
  for (double s : partial.to_vector<double>()) total += s;
  return std::sqrt(total);
}

double clip_coefficient(double norm, double max_norm) {
  const double coef = max_norm / (norm + 1e-6);
  return std::isfinite(norm) && coef < 1.0 ? coef : 1.0;
}

double clip_grad_norm(const std::vector<Tensor>& grads, double max_norm) {
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i].defined() && !grads[i].is_contiguous())
      fail("clip_grad_norm",
           "gradient " + std::to_string(i) + " must be contiguous (it is scaled in place)");
  const double norm = global_norm(grads);
  // A non-finite norm leaves the gradients untouched; the caller sees it in the returned norm.
  const double coef = clip_coefficient(norm, max_norm);
  if (coef < 1.0)
    for (const Tensor& g : grads) {
      if (g.numel() == 0) continue;
      // CPU kernels compute 16-bit floats through an f32 copy (binary_scalar converts back).
      if (detail::cpu_upcast(g))
        g.copy_(binary_scalar(BinaryOp::mul, g, coef));
      else
        SPRIG_DISPATCH(g.device(), binary_scalar, BinaryOp::mul, g, coef, false, g);
    }
  return norm;
}

void adamw_step(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                const Tensor& exp_avg_sq, const AdamWParams& hp, const Tensor& compute_copy) {
  const char* op = "adamw_step";
  const auto check_state = [&](const Tensor& t, const char* name) {
    check_defined(op, t, name);
    check_shape(op, t, param.shape(), name);
    if (!t.is_contiguous()) fail(op, std::string(name) + " must be contiguous");
    check_same_device(op, {&param, &t});
  };
  // t's dtype is a or b (a alone when b == a).
  const auto check_dtype = [&](const Tensor& t, const char* name, DType a, DType b) {
    if (t.dtype() == a || t.dtype() == b) return;
    const std::string allowed =
        std::string(dtype_name(a)) + (a == b ? "" : " or ") + (a == b ? "" : dtype_name(b));
    fail(op, std::string(name) + " must be " + allowed + ", got " + dtype_name(t.dtype()));
  };
  check_state(param, "param");
  check_state(grad, "grad");
  check_state(exp_avg, "exp_avg");
  check_state(exp_avg_sq, "exp_avg_sq");
  check_dtype(param, "param", DType::f32, DType::f32);
  check_dtype(exp_avg, "exp_avg", DType::f32, DType::f32);
  check_dtype(exp_avg_sq, "exp_avg_sq", DType::f32, DType::f32);
  check_dtype(grad, "grad", DType::f32, DType::bf16);
  if (compute_copy.defined()) {
    check_state(compute_copy, "compute_copy");
    check_dtype(compute_copy, "compute_copy", DType::bf16, DType::f16);
  }
  if (hp.step < 1) fail(op, "step must be >= 1, got " + std::to_string(hp.step));
  if (!std::isfinite(hp.grad_scale) || hp.grad_scale < 0)
    fail(op, "grad_scale must be finite and >= 0, got " + std::to_string(hp.grad_scale));
  if (param.numel() > 0)
    SPRIG_DISPATCH(param.device(), adamw, param, grad, exp_avg, exp_avg_sq, compute_copy, hp);
}

}  // namespace sprig
