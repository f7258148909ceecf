// CPU copy (strided, any dtype to any dtype) and fill.
#include <cstring>

#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

void copy(const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  visit_dtype(src.dtype(), [&](auto s_tag) {
    visit_dtype(dst.dtype(), [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      const S* s = static_cast<const S*>(src.data_ptr());
      D* d = static_cast<D*>(dst.data_ptr());
      if (src.is_contiguous() && dst.is_contiguous()) {
#pragma omp parallel for if (n > kParallelGrain)
        for (int64_t i = 0; i < n; ++i) d[i] = convert<D>(s[i]);
        return;
      }
      const Shape& shape = dst.shape();
#pragma omp parallel for if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i)
        d[strided_offset(i, shape, dst.strides())] =
            convert<D>(s[strided_offset(i, shape, src.strides())]);
    });
  });
}

void fill(const Tensor& dst, double value) {
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = convert<T>(value);
    T* d = static_cast<T*>(dst.data_ptr());
    const int64_t n = dst.numel();
#pragma omp parallel for if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  });
}

}  // namespace sprig::cpu
