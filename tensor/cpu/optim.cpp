// CPU optimizer kernels: sum of squares (for gradient norms) and the AdamW update, in place on
// fp32 master weights and moments (torch.optim.AdamW, single-tensor path).
#include <cmath>
#include <type_traits>

#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

void sum_squares(const Tensor& x, const Tensor& out) {
  const int64_t n = x.numel();
  visit_floating(x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    double sum = 0;
#pragma omp parallel for reduction(+ : sum) if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) sum += convert<double>(xp[i]) * convert<double>(xp[i]);
    out.data<double>()[0] = sum;
  });
}

namespace {

// One AdamW update over n elements; C is the compute copy's type (void: none). The new values are
// computed in registers and each stored once (restrict-qualified buffers, the constants copied
// locally): no reload after a store.
template <class G, class C>
void adamw_loop(float* __restrict p, const G* __restrict grad, float* __restrict m,
                float* __restrict v, C* __restrict copy, int64_t n, const AdamWScalars& scalars) {
  const AdamWScalars s = scalars;
#pragma omp parallel for simd if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    const float g = convert<float>(grad[i]) * s.grad_scale;
    const float decayed = p[i] * s.decay;                    // decoupled weight decay
    const float mi = m[i] + s.one_minus_beta1 * (g - m[i]);  // torch's lerp(m, g, 1 - beta1)
    const float vi = v[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float denom = std::sqrt(vi) / s.bias2_sqrt + s.eps;
    const float pi = decayed - s.step_size * (mi / denom);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if constexpr (!std::is_void_v<C>) copy[i] = convert<C>(pi);
  }
}

}  // namespace

void adamw(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
           const Tensor& compute_copy, const AdamWParams& hp) {
  const AdamWScalars s = adamw_scalars(hp);
  float* p = param.data<float>();
  float* m = exp_avg.data<float>();
  float* v = exp_avg_sq.data<float>();
  const int64_t n = param.numel();
  visit_floating(grad.dtype(), "adamw", [&](auto g_tag) {
    using G = decltype(g_tag);
    const G* g = grad.data<G>();
    if (!compute_copy.defined()) {
      adamw_loop<G, void>(p, g, m, v, nullptr, n, s);
      return;
    }
    visit_floating(compute_copy.dtype(), "adamw", [&](auto c_tag) {
      using C = decltype(c_tag);
      adamw_loop(p, g, m, v, compute_copy.data<C>(), n, s);
    });
  });
}

}  // namespace sprig::cpu
