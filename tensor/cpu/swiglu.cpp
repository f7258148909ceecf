// CPU SwiGLU, silu(gate) * up, forward and backward, any shape (contiguous), computed in
// A = acc_t<T> from elements read in their own dtype.
#include <cmath>

#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

namespace {
template <class A> A sigmoid(A v) { return A(1) / (A(1) + std::exp(-v)); }
}  // namespace

void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const int64_t n = gate.numel();
  visit_floating(gate.dtype(), "swiglu", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* gp = gate.data<T>();
    const T* up_p = up.data<T>();
    T* op = out.data<T>();
#pragma omp parallel for if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const A g = convert<A>(gp[i]);
      op[i] = convert<T>(g * sigmoid(g) * convert<A>(up_p[i]));
    }
  });
}

void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                     const Tensor& dup) {
  const int64_t n = gate.numel();
  visit_floating(gate.dtype(), "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* gp = gate.data<T>();
    const T* up_p = up.data<T>();
    const T* dop = dout.data<T>();
    T* dgp = dgate.data<T>();
    T* dup_p = dup.data<T>();
    // silu'(g) = s * (1 + g * (1 - s)) with s = sigmoid(g).
#pragma omp parallel for if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) {
      const A g = convert<A>(gp[i]), s = sigmoid(g), d = convert<A>(dop[i]);
      dgp[i] = convert<T>(d * convert<A>(up_p[i]) * s * (A(1) + g * (A(1) - s)));
      dup_p[i] = convert<T>(d * g * s);
    }
  });
}

}  // namespace sprig::cpu
