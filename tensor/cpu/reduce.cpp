// CPU reductions over one dimension (sum, mean, max, logsumexp), argmax, softmax / log_softmax and
// their backward. Tensors are contiguous and viewed as [outer, n, inner] around the reduced dim:
// each (outer, inner) pair is a line of n elements spaced `inner` apart, and a reduction writes
// one value per line at index outer * inner + inner_index (x's shape without dim). Floating
// kernels take f32 or f64 (the dispatcher converts 16-bit floats) and accumulate in that type.
// Maxima ignore NaN and pick the first maximum; a line of all -inf has logsumexp -inf, softmax 0
// and log_softmax -inf.
// Backward rule: softmax_backward writes (`=`) the activation gradient dx.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tensor/cpu/eigen_arrays.h"
#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

namespace {

// The lines of a contiguous tensor of `shape` along `dim`.
struct Lines {
  int64_t count = 1, n = 1, inner = 1;
  Lines(const Shape& shape, int64_t dim) : n(shape[dim]) {
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      if (d != dim) count *= shape[d];
    for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d) inner *= shape[d];
  }
  int64_t start(int64_t line) const { return (line / inner) * n * inner + line % inner; }
};

// Element k of line `line` is at p[k * stride].
template <class T> struct Line {
  T* p;
  int64_t n, stride;
  T& operator[](int64_t k) const { return p[k * stride]; }
};

// Calls f(line index, element offset of its first element) for every line, in parallel.
template <class F> void for_each_line(const Lines& lines, F f) {
#pragma omp parallel for if (lines.count * lines.n > kParallelGrain)
  for (int64_t l = 0; l < lines.count; ++l) f(l, lines.start(l));
}

template <class T> constexpr T kNegInf = -std::numeric_limits<T>::infinity();

template <class T> T line_max(Line<const T> x) {
  if (x.stride == 1 && x.n > 0)  // vectorised; PropagateNumbers skips NaN like the loop below
    return std::max(kNegInf<T>,
                    ConstArrayMap<T>(x.p, x.n).template maxCoeff<Eigen::PropagateNumbers>());
  T m = kNegInf<T>;
  for (int64_t k = 0; k < x.n; ++k)
    if (x[k] > m) m = x[k];
  return m;
}

template <class T> T line_sum(Line<const T> x) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < x.n; ++k) s += x[k];
  return s;
}

// sum (or mean) over a dim with inner > 1. Walking lines `inner` apart would touch a new cache
// line (and page) per element, so each task instead streams through rows of a block of up to
// kColumns adjacent lines, accumulating straight into out.
template <class T> void sum_columns(const T* x, T* out, const Lines& lines, bool mean) {
  constexpr int64_t kColumns = 512;
  const int64_t n = lines.n, inner = lines.inner, outer = lines.count / inner;
  const int64_t blocks = (inner + kColumns - 1) / kColumns;
#pragma omp parallel for collapse(2) if (lines.count * n > kParallelGrain)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t j0 = b * kColumns, width = std::min(kColumns, inner - j0);
      const T* xs = x + o * n * inner + j0;
      T* acc = out + o * inner + j0;
      for (int64_t j = 0; j < width; ++j) acc[j] = 0;
      for (int64_t k = 0; k < n; ++k)
        for (int64_t j = 0; j < width; ++j) acc[j] += xs[k * inner + j];
      if (mean)
        for (int64_t j = 0; j < width; ++j) acc[j] /= static_cast<T>(n);
    }
  }
}

// log(sum(exp(x))) shifted by the maximum; infinite maxima (all -inf, or a +inf) are the result.
template <class T> T line_logsumexp(Line<const T> x) {
  const T m = line_max(x);
  if (std::isinf(m)) return m;
  T s = 0;
  for (int64_t k = 0; k < x.n; ++k) s += std::exp(x[k] - m);
  return m + std::log(s);
}

template <class T> T reduce_line(ReduceOp op, Line<const T> x) {
  switch (op) {
    case ReduceOp::sum: return line_sum(x);
    case ReduceOp::mean: return line_sum(x) / static_cast<T>(x.n);
    case ReduceOp::max: return line_max(x);
    case ReduceOp::logsumexp: return line_logsumexp(x);
  }
  return 0;
}

// Contiguous runs go through Eigen's vectorised exp (tests/tensor/vector_math_test.cpp bounds the
// error).
// Its SSE and AVX paths give exp(-inf) a tiny positive value (about 3e-39) instead of 0: harmless
// in a sum of terms of which the largest is 1, and set back to exactly 0 where it is an output.
template <class T> void zero_where_minus_inf(const T* x, T* y, int64_t n) {
  for (int64_t k = 0; k < n; ++k)
    if (x[k] == kNegInf<T>) y[k] = T(0);
}

template <class T> void softmax_line(Line<const T> x, Line<T> y, bool log) {
  const T m = line_max(x);
  if (m == kNegInf<T>) {  // nothing to normalise: every probability is 0
    for (int64_t k = 0; k < x.n; ++k) y[k] = log ? kNegInf<T> : T(0);
    return;
  }
  if (x.stride == 1 && y.stride == 1) {  // the last dim: vectorised
    const ConstArrayMap<T> xs(x.p, x.n);
    ArrayMap<T> ys(y.p, y.n);
    if (log) {
      ys = xs - (m + std::log((xs - m).exp().sum()));
    } else {
      ys = (xs - m).exp();
      zero_where_minus_inf(x.p, y.p, x.n);
      ys *= T(1) / ys.sum();
    }
    return;
  }
  T s = 0;
  for (int64_t k = 0; k < x.n; ++k) {
    const T e = std::exp(x[k] - m);
    if (!log) y[k] = e;
    s += e;
  }
  if (log) {
    const T shift = m + std::log(s);
    for (int64_t k = 0; k < x.n; ++k) y[k] = x[k] - shift;
  } else {
    const T inv = T(1) / s;
    for (int64_t k = 0; k < x.n; ++k) y[k] *= inv;
  }
}

// softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy).
template <class T>
void softmax_backward_line(Line<const T> y, Line<const T> dy, Line<T> dx, bool log) {
  if (y.stride == 1 && dy.stride == 1 && dx.stride == 1) {  // the last dim: vectorised
    const ConstArrayMap<T> ys(y.p, y.n), dys(dy.p, dy.n);
    ArrayMap<T> dxs(dx.p, dx.n);
    if (log) {
      const T s = dys.sum();
      dxs = dys - ys.exp() * s;
      for (int64_t k = 0; k < y.n; ++k)  // exp(-inf) is exactly 0 (see zero_where_minus_inf)
        if (y.p[k] == kNegInf<T>) dx.p[k] = dy.p[k];
    } else {
      const T s = (dys * ys).sum();
      dxs = ys * (dys - s);
    }
    return;
  }
  T s = 0;
  for (int64_t k = 0; k < y.n; ++k) s += log ? dy[k] : dy[k] * y[k];
  for (int64_t k = 0; k < y.n; ++k) dx[k] = log ? dy[k] - std::exp(y[k]) * s : y[k] * (dy[k] - s);
}

template <class T> Line<T> line_of(const Tensor& t, const Lines& lines, int64_t start) {
  return {static_cast<T*>(t.data_ptr()) + start, lines.n, lines.inner};
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t dim) {
  visit_f32_f64(x.dtype(), "reduce", [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    const Lines lines(x.shape(), dim);
    if (lines.inner > 1 && (op == ReduceOp::sum || op == ReduceOp::mean))
      return sum_columns(px, po, lines, op == ReduceOp::mean);
    for_each_line(lines, [&](int64_t l, int64_t start) {
      po[l] = reduce_line(op, line_of<const T>(x, lines, start));
    });
  });
}

void argmax(const Tensor& x, const Tensor& out, int64_t dim) {
  visit_f32_f64(x.dtype(), "argmax", [&](auto tag) {
    using T = decltype(tag);
    int64_t* po = out.data<int64_t>();
    const Lines lines(x.shape(), dim);
    for_each_line(lines, [&](int64_t l, int64_t start) {
      const Line<const T> xl = line_of<const T>(x, lines, start);
      T best = kNegInf<T>;
      int64_t index = 0;
      for (int64_t k = 0; k < xl.n; ++k) {
        if (xl[k] > best) {
          best = xl[k];
          index = k;
        }
      }
      po[l] = index;
    });
  });
}

void softmax(const Tensor& x, const Tensor& y, int64_t dim, bool log) {
  visit_f32_f64(x.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const Lines lines(x.shape(), dim);
    for_each_line(lines, [&](int64_t, int64_t start) {
      softmax_line(line_of<const T>(x, lines, start), line_of<T>(y, lines, start), log);
    });
  });
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int64_t dim, bool log) {
  visit_f32_f64(y.dtype(), log ? "log_softmax_backward" : "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const Lines lines(y.shape(), dim);
    for_each_line(lines, [&](int64_t, int64_t start) {
      softmax_backward_line(line_of<const T>(y, lines, start), line_of<const T>(dy, lines, start),
                            line_of<T>(dx, lines, start), log);
    });
  });
}

}  // namespace sprig::cpu
