// The differentiable GRU (PyTorch's nn.GRU with bias=False, one layer, batch_first, h0 = 0) as one
// autograd node over the whole sequence.
//   forward: gi = x W_ih^T for every step in one GEMM; per step gh = h_{t-1} W_hh^T (none at
//     t = 0, where h_{-1} = 0) and the gate kernel (gru_cell in tensor/ops.h), which writes h_t
//     and the gates in place.
//   backward: steps in reverse; dh_t = dy_t + the gradient carried from step t + 1; the gate
//     backward gives dgi_t, dgh_t and the direct part of dh_{t-1}, to which dgh_t W_hh is added.
//     Then dW_ih, dx and dW_hh are one GEMM each over all steps. A single GEMM for dW_hh (instead
//     of one accumulated per step) keeps the sum over steps in the GEMM's fp32 accumulator (Eigen
//     in f32 for 16-bit inputs on CPU, cuBLASLt's fp32 compute type on CUDA) and rounds a 16-bit
//     dW_hh once, not once per step.
// Layouts, chosen so that no sequence-sized transpose is copied: x, gi, dgi and dx keep x's
// batch-major [R, T, .] layout (the gate kernels read and write one step's rows in place, T rows
// apart), so the input GEMMs run on x as it is; h, the gates and dgh are
// time-major [T, R, .], so h_{t-1} is a contiguous GEMM operand and dW_hh pairs dgh_t with h_{t-1}
// in one [(T - 1) R, .] GEMM. The result is a [R, T, G] view of the time-major h buffer, which the
// backward keeps anyway.
#include <stdexcept>
#include <string>

#include "autograd/functions.h"

namespace sprig {

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("[gru] " + msg); }

void check_gru(const Var& x, const Var& w_ih, const Var& w_hh) {
  if (!x.defined() || !w_ih.defined() || !w_hh.defined()) fail("x, w_ih and w_hh must be defined");
  if (x.dim() != 3) fail("x must be [R, T, E], got " + shape_str(x.shape()));
  if (w_hh.dim() != 2 || w_hh.size(0) != 3 * w_hh.size(1))
    fail("w_hh must be [3G, G], got " + shape_str(w_hh.shape()));
  const Shape ih{w_hh.size(0), x.size(2)};
  if (w_ih.shape() != ih)
    fail("w_ih must be [3G, E] = " + shape_str(ih) + " for x " + shape_str(x.shape()) +
         " and w_hh " + shape_str(w_hh.shape()) + ", got " + shape_str(w_ih.shape()));
  if (!is_floating(x.dtype()) || w_ih.dtype() != x.dtype() || w_hh.dtype() != x.dtype())
    fail(std::string("x, w_ih and w_hh must share one floating dtype, got ") +
         dtype_name(x.dtype()) + ", " + dtype_name(w_ih.dtype()) + " and " +
         dtype_name(w_hh.dtype()));
  if (w_ih.device() != x.device() || w_hh.device() != x.device())
    fail("x, w_ih and w_hh must be on one device, got " + x.device().str() + ", " +
         w_ih.device().str() + " and " + w_hh.device().str());
}

// An empty output (R, T or G is 0): zeros forward, zero gradients.
Var empty_gru(const Var& x, const Var& w_ih, const Var& w_hh) {
  const Shape xs = x.shape(), is = w_ih.shape(), hs = w_hh.shape();
  const DType dt = x.dtype();
  const Device dev = x.device();
  return record(
      "gru", Tensor::zeros({xs[0], xs[1], hs[1]}, dt, dev), {x, w_ih, w_hh},
      [xs, is, hs, dt, dev](const Tensor&) -> Grads {
        return {Tensor::zeros(xs, dt, dev), Tensor::zeros(is, dt, dev), Tensor::zeros(hs, dt, dev)};
      });
}

// What the backward reads: the forward's sequence buffers, and which inputs want gradients.
struct GruSaved {
  int64_t R, T, E, G;
  Tensor x;          // [R, T, E] contiguous, kept when w_ih requires grad
  Tensor w_ih;       // kept when x requires grad
  Tensor w_hh;       // [3G, G]
  Tensor hs, gates;  // every step's h [T, R, G] and gates [T, R, 4G]
  bool x_grad, wi_grad, wh_grad;
};

Grads gru_backward(const GruSaved& s, const Tensor& dy) {
  const int64_t R = s.R, T = s.T, G = s.G;
  const DType dt = s.hs.dtype();
  const Device dev = s.hs.device();
  // dgi of every step when dW_ih or dx read it after the loop, else one step's buffer; dgh
  // likewise for dW_hh.
  const bool keep_dgi = s.wi_grad || s.x_grad;
  const Tensor dgi = Tensor::empty({R, keep_dgi ? T : 1, 3 * G}, dt, dev);
  const Tensor dgh = Tensor::empty({s.wh_grad ? T : 1, R, 3 * G}, dt, dev);
  const Tensor carry = Tensor::empty({R, G}, dt, dev);  // the part of dh_{t-1} from step t
  const Tensor h0 = Tensor::zeros({R, G}, dt, dev);
  for (int64_t t = T - 1; t >= 0; --t) {
    const Tensor dh = t == T - 1 ? dy.select(1, t) : add(dy.select(1, t), carry);
    const Tensor dgh_t = dgh.select(0, s.wh_grad ? t : 0);
    gru_cell_backward_into(dh, t > 0 ? s.hs.select(0, t - 1) : h0, s.gates.select(0, t),
                           {dgi.select(1, keep_dgi ? t : 0), dgh_t, carry});
    if (t > 0) matmul_into(dgh_t, s.w_hh, carry, false, false, /*accumulate=*/true);
  }
  Tensor dx, dw_ih, dw_hh;
  const Tensor dgi_rows = keep_dgi ? dgi.view({R * T, 3 * G}) : Tensor();
  if (s.wi_grad) dw_ih = matmul(dgi_rows, s.x.view({R * T, s.E}), true, false);
  if (s.x_grad) dx = matmul(dgi_rows, s.w_ih).view({R, T, s.E});
  // dW_hh = sum over t >= 1 of dgh_t^T h_{t-1} (step 0 has h_{-1} = 0).
  if (s.wh_grad)
    dw_hh = T > 1 ? matmul(dgh.narrow(0, 1, T - 1).view({(T - 1) * R, 3 * G}),
                           s.hs.narrow(0, 0, T - 1).view({(T - 1) * R, G}), true, false)
                  : Tensor::zeros(s.w_hh.shape(), dt, dev);
  return {dx, dw_ih, dw_hh};
}

}  // namespace

Var gru(const Var& x, const Var& w_ih, const Var& w_hh) {
  check_gru(x, w_ih, w_hh);
  const int64_t R = x.size(0), T = x.size(1), E = x.size(2), G = w_hh.size(1);
  if (R * T * G == 0) return empty_gru(x, w_ih, w_hh);
  const DType dt = x.dtype();
  const Device dev = x.device();
  const Tensor wi = w_ih.value(), wh = w_hh.value();

  const Tensor xv = x.value().contiguous();
  const Tensor gi = matmul(xv.view({R * T, E}), wi, false, true).view({R, T, 3 * G});
  const Tensor hs = Tensor::empty({T, R, G}, dt, dev);
  const Tensor gates = Tensor::empty({T, R, 4 * G}, dt, dev);
  const Tensor h0 = Tensor::zeros({R, G}, dt, dev);
  const Tensor gh = Tensor::zeros({R, 3 * G}, dt, dev);  // step 0: W_hh h_{-1} = 0
  for (int64_t t = 0; t < T; ++t) {
    if (t > 0) matmul_into(hs.select(0, t - 1), wh, gh, false, true, false);
    gru_cell_into(gi.select(1, t), gh, t > 0 ? hs.select(0, t - 1) : h0,
                  {hs.select(0, t), gates.select(0, t)});
  }

  const bool x_grad = x.requires_grad(), wi_grad = w_ih.requires_grad();
  // Only what the backward of the inputs that require grad reads is kept.
  const GruSaved saved{.R = R,
                       .T = T,
                       .E = E,
                       .G = G,
                       .x = wi_grad ? xv : Tensor(),
                       .w_ih = x_grad ? wi : Tensor(),
                       .w_hh = wh,
                       .hs = hs,
                       .gates = gates,
                       .x_grad = x_grad,
                       .wi_grad = wi_grad,
                       .wh_grad = w_hh.requires_grad()};
  return record("gru", hs.transpose(0, 1), {x, w_ih, w_hh},
                [saved](const Tensor& dy) -> Grads { return gru_backward(saved, dy); });
}

}  // namespace sprig
