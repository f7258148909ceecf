// CPU rotary embedding (rotate-half layout), forward and its transposed rotation (the backward).
// x, y [B, T, nH, D], pos [B, T]. cos/sin in fp32 as HF computes them (vectorised), times the
// attention scaling in fp32, rounded to x's dtype, once per distinct position.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/cpu/eigen_arrays.h"
#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

void rope(const Tensor& x, const Tensor& pos, const Tensor& y, const RopeFrequencies& freqs,
          bool inverse) {
  const int64_t tokens = x.size(0) * x.size(1), heads = x.size(2), D = x.size(3), half = D / 2;
  const std::vector<float>& inv_freq = freqs.inv_freq;
  const float scale = freqs.attention_scaling;
  const std::vector<int64_t> positions = pos.to_vector<int64_t>();
  // Rows share positions (every row of a batch starts at 0, packed documents restart): the angles
  // of each distinct position are computed once, into row `slot[t]` of the table.
  std::vector<int64_t> distinct(positions);
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<int64_t> slot(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t)
    slot[t] = std::lower_bound(distinct.begin(), distinct.end(), positions[t]) - distinct.begin();
  const int64_t P = static_cast<int64_t>(distinct.size());
  visit_floating(x.dtype(), "rope", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    // HF: freqs = float(pos) * inv_freq in fp32, cos/sin in fp32 times the attention scaling, then
    // cast to x's dtype. The
    // fp32 cos/sin are Eigen's vectorised ones (docs/architecture.md: within 2^-23 of the exact
    // value), over one aligned table padded to whole vectors, so every angle takes the vector path.
    const int64_t n = P * half, padded = (n + 15) / 16 * 16;
    ScratchBuffer<float> angle(static_cast<size_t>(padded), 0.0f), cos32(angle.size()),
        sin32(angle.size());
    for (int64_t p = 0; p < P; ++p)
      for (int64_t i = 0; i < half; ++i)
        angle[p * half + i] = static_cast<float>(distinct[p]) * inv_freq[i];
    for_each_block(padded, kParallelGrain / 16, [&](int64_t off, int64_t len) {
      const ConstArrayMap<float> a(angle.data() + off, len);
      ArrayMap<float>(cos32.data() + off, len) = a.cos();
      ArrayMap<float>(sin32.data() + off, len) = a.sin();
    });
    std::vector<A> cosines(static_cast<size_t>(n)), sines(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      const float c = cos32[k] * scale, s = sin32[k] * scale;
      cosines[k] = round_to<T>(A(c));
      sines[k] = round_to<T>(A(inverse ? -s : s));
    }
#pragma omp parallel for if (x.numel() > kParallelGrain)
    for (int64_t tok = 0; tok < tokens; ++tok) {
      const A* c = cosines.data() + slot[tok] * half;
      const A* sn = sines.data() + slot[tok] * half;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = (tok * heads + h) * D;
#pragma omp simd  // y may be x itself: element i is read before it is written
        for (int64_t i = 0; i < half; ++i) {
          const A x1 = convert<A>(xp[base + i]), x2 = convert<A>(xp[base + half + i]);
          yp[base + i] = convert<T>(x1 * c[i] - x2 * sn[i]);
          yp[base + half + i] = convert<T>(x2 * c[i] + x1 * sn[i]);
        }
      }
    }
  });
}

}  // namespace sprig::cpu
