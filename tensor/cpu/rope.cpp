// CPU rotary embedding (rotate-half layout), forward and its inverse rotation (the backward).
// x, y [B, T, nH, D], pos [B, T]. cos/sin in fp32 as HF computes them, rounded to x's dtype.
#include <cmath>

#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

void rope(const Tensor& x, const Tensor& pos, const Tensor& y, double theta, bool inverse) {
  const int64_t tokens = x.size(0) * x.size(1), heads = x.size(2), D = x.size(3), half = D / 2;
  const std::vector<float> inv_freq = rope_inv_freq(D, theta);
  const std::vector<int64_t> positions = pos.to_vector<int64_t>();
  visit_floating(x.dtype(), "rope", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
#pragma omp parallel if (x.numel() > kParallelGrain)
    {
      std::vector<A> cosines(half), sines(half);
#pragma omp for
      for (int64_t tok = 0; tok < tokens; ++tok) {
        // HF: freqs = float(pos) * inv_freq in fp32; cos/sin in fp32 (evaluated in f64 and
        // rounded, as the CUDA twin does), then cast to x's dtype.
        for (int64_t i = 0; i < half; ++i) {
          const float freq = static_cast<float>(positions[tok]) * inv_freq[i];
          const A s = round_to<T>(A(static_cast<float>(std::sin(static_cast<double>(freq)))));
          cosines[i] = round_to<T>(A(static_cast<float>(std::cos(static_cast<double>(freq)))));
          sines[i] = inverse ? -s : s;
        }
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t base = (tok * heads + h) * D;
          for (int64_t i = 0; i < half; ++i) {
            const A x1 = convert<A>(xp[base + i]), x2 = convert<A>(xp[base + half + i]);
            yp[base + i] = convert<T>(x1 * cosines[i] - x2 * sines[i]);
            yp[base + half + i] = convert<T>(x2 * cosines[i] + x1 * sines[i]);
          }
        }
      }
    }
  });
}

}  // namespace sprig::cpu
