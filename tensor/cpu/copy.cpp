// CPU copy (strided, any dtype to any dtype) and fill.
#include <cstring>
#include <type_traits>

#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

namespace {

// A strided copy's iteration space: dst's shape with adjacent dimensions merged wherever both
// tensors step through them as one (and size-1 dimensions dropped), so the innermost dimension,
// copied as one run, is as long as the layouts allow.
struct CopyLayout {
  Shape shape, src_strides, dst_strides;
};

CopyLayout merged_layout(const Tensor& src, const Tensor& dst) {
  CopyLayout l;
  for (int64_t d = 0; d < dst.dim(); ++d) {
    const int64_t n = dst.size(d), ss = src.strides()[d], ds = dst.strides()[d];
    if (n == 1) continue;
    if (!l.shape.empty() && l.src_strides.back() == ss * n && l.dst_strides.back() == ds * n) {
      l.shape.back() *= n;
      l.src_strides.back() = ss;
      l.dst_strides.back() = ds;
      continue;
    }
    l.shape.push_back(n);
    l.src_strides.push_back(ss);
    l.dst_strides.push_back(ds);
  }
  if (l.shape.empty()) l = {{1}, {1}, {1}};
  return l;
}

}  // namespace

void copy(const Tensor& src, const Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (src.dtype() == dst.dtype() && src.is_contiguous() && dst.is_contiguous()) {
    std::memcpy(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    return;
  }
  const CopyLayout l = merged_layout(src, dst);
  const int64_t width = l.shape.back(), rows = n / width;
  const int64_t ss = l.src_strides.back(), ds = l.dst_strides.back();
  visit_dtype(src.dtype(), [&](auto s_tag) {
    visit_dtype(dst.dtype(), [&](auto d_tag) {
      using S = decltype(s_tag);
      using D = decltype(d_tag);
      const S* s = static_cast<const S*>(src.data_ptr());
      D* d = static_cast<D*>(dst.data_ptr());
      // Row by row of the innermost dimension: the offsets are computed once per row.
#pragma omp parallel for if (n > kParallelGrain)
      for (int64_t r = 0; r < rows; ++r) {
        const S* from = s + strided_offset(r * width, l.shape, l.src_strides);
        D* to = d + strided_offset(r * width, l.shape, l.dst_strides);
        if constexpr (std::is_same_v<S, D>) {
          if (ss == 1 && ds == 1) {
            std::memcpy(to, from, static_cast<size_t>(width) * sizeof(S));
            continue;
          }
        }
        for (int64_t i = 0; i < width; ++i) to[i * ds] = convert<D>(from[i * ss]);
      }
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
