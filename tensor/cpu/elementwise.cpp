// CPU elementwise kernels: unary ops and their backward, binary ops (tensor-tensor and
// tensor-scalar) and where. Floating kernels take f32 or f64 (the dispatcher converts 16-bit
// floats); where moves elements without arithmetic and takes any dtype.
// Backward rule: unary_backward writes (`=`) the activation gradient dx.
// exp, log, tanh, sigmoid and SiLU (and SiLU's backward) go through Eigen's vectorised array
// functions, within 4 f32 ulps of the exact values, tanh 6 (tests/tensor/vector_math_test.cpp);
// strided operands are made contiguous first, so they round exactly as contiguous ones do.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "tensor/cpu/eigen_arrays.h"
#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

namespace {

// Calls body(out_offset, in_offsets...) for every element of `out` in row-major order, each offset
// locating that element in the matching tensor (all share out's shape, any strides). When every
// operand is contiguous this is one flat loop the compiler vectorises; otherwise rows of the last
// dimension are walked with each operand's last stride, so broadcast (stride 0) and transposed
// operands pay for one offset computation per row rather than per element.
template <class Body, class... Ins>
void for_each_element(const Tensor& out, Body body, const Ins&... ins) {
  const int64_t n = out.numel();
  if (n == 0) return;
  if (out.is_contiguous() && (ins.is_contiguous() && ...)) {
#pragma omp parallel for if (n > kParallelGrain)
    for (int64_t i = 0; i < n; ++i) body(i, (static_cast<void>(ins), i)...);
    return;
  }
  struct Cursor {
    int64_t base, step;
  };
  const Shape& shape = out.shape();
  const int64_t width = shape.empty() ? 1 : shape.back();
  const int64_t rows = n / width;
#pragma omp parallel for if (n > kParallelGrain)
  for (int64_t r = 0; r < rows; ++r) {
    const auto cursor = [&](const Tensor& t) {
      return Cursor{strided_offset(r * width, shape, t.strides()),
                    t.dim() == 0 ? 0 : t.strides().back()};
    };
    const auto walk_row = [&](Cursor o, auto... in) {
      if (o.step == 1 && ((in.step == 1) && ...)) {  // unit strides: a loop that vectorises
        for (int64_t j = 0; j < width; ++j) body(o.base + j, (in.base + j)...);
      } else {
        for (int64_t j = 0; j < width; ++j) body(o.base + j * o.step, (in.base + j * in.step)...);
      }
    };
    walk_row(cursor(out), cursor(ins)...);
  }
}

// Calls run(f) with f the scalar function of `op` (each op gets its own inlined loop).
template <class T, class Run> void with_unary_fn(UnaryOp op, T p, Run&& run) {
  switch (op) {
    case UnaryOp::neg: return run([](T x) { return -x; });
    case UnaryOp::exp: return run([](T x) { return std::exp(x); });
    case UnaryOp::log: return run([](T x) { return std::log(x); });
    case UnaryOp::sqrt: return run([](T x) { return std::sqrt(x); });
    case UnaryOp::rsqrt: return run([](T x) { return T(1) / std::sqrt(x); });
    case UnaryOp::tanh: return run([](T x) { return std::tanh(x); });
    case UnaryOp::sigmoid: return run([](T x) { return T(1) / (T(1) + std::exp(-x)); });
    case UnaryOp::silu: return run([](T x) { return x / (T(1) + std::exp(-x)); });
    case UnaryOp::pow: return run([p](T x) { return std::pow(x, p); });
    case UnaryOp::abs: return run([](T x) { return std::abs(x); });
  }
}

// Calls run(g) with g(x, y, dy) = dy * op'(x), where y = op(x).
template <class T, class Run> void with_unary_grad(UnaryOp op, T p, Run&& run) {
  switch (op) {
    case UnaryOp::neg: return run([](T, T, T dy) { return -dy; });
    case UnaryOp::exp: return run([](T, T y, T dy) { return dy * y; });
    case UnaryOp::log: return run([](T x, T, T dy) { return dy / x; });
    case UnaryOp::sqrt: return run([](T, T y, T dy) { return dy * T(0.5) / y; });
    case UnaryOp::rsqrt: return run([](T, T y, T dy) { return dy * T(-0.5) * y * y * y; });
    case UnaryOp::tanh: return run([](T, T y, T dy) { return dy * (T(1) - y * y); });
    case UnaryOp::sigmoid: return run([](T, T y, T dy) { return dy * y * (T(1) - y); });
    case UnaryOp::silu:
      return run([](T x, T, T dy) {
        const T s = T(1) / (T(1) + std::exp(-x));
        return dy * s * (T(1) + x * (T(1) - s));
      });
    case UnaryOp::pow:  // d/dx x^0 is 0 everywhere (also at x = 0, where x^-1 is infinite)
      return run([p](T x, T, T dy) { return p == T(0) ? T(0) : dy * p * std::pow(x, p - T(1)); });
    case UnaryOp::abs:
      return run([](T x, T, T dy) { return x > T(0) ? dy : (x < T(0) ? -dy : T(0)); });
  }
}

// Calls run(f) with f(a, b) = a op b.
template <class T, class Run> void with_binary_fn(BinaryOp op, Run&& run) {
  switch (op) {
    case BinaryOp::add: return run([](T a, T b) { return a + b; });
    case BinaryOp::sub: return run([](T a, T b) { return a - b; });
    case BinaryOp::mul: return run([](T a, T b) { return a * b; });
    case BinaryOp::div: return run([](T a, T b) { return a / b; });
  }
}

// Calls f(U{}) with U an unsigned integer of the element size of `t`.
template <class F> void visit_element_size(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    default: f(uint64_t{}); return;
  }
}

// The ops with a transcendental function that Eigen vectorises.
bool has_vector_form(UnaryOp op) {
  return op == UnaryOp::exp || op == UnaryOp::log || op == UnaryOp::tanh ||
         op == UnaryOp::sigmoid || op == UnaryOp::silu;
}

// Runs f(dst, srcs...) on contiguous arrays: dst is `out` itself when contiguous, else a buffer
// copied into it afterwards; each src is its tensor or a contiguous copy. Strided operands thus
// round exactly as contiguous ones do.
template <class T, class F, class... Ins>
void on_contiguous(const Tensor& out, F f, const Ins&... ins) {
  const Tensor dst = out.is_contiguous() ? out : Tensor::empty(out.shape(), out.dtype());
  f(dst.data<T>(), ins.contiguous().template data<T>()...);  // the copies live to the `;`
  if (!out.is_contiguous()) out.copy_(dst);
}

// y = op(x) over n contiguous elements through Eigen's array functions (has_vector_form ops).
template <class T> void vectorised_unary(UnaryOp op, T* py, const T* px, int64_t n) {
  const auto apply = [&](auto f) {
    for_each_block(n, kParallelGrain, [&](int64_t b, int64_t len) {
      ArrayMap<T> y(py + b, len);
      f(ConstArrayMap<T>(px + b, len), y);
    });
  };
  switch (op) {
    case UnaryOp::exp: return apply([](const auto& x, auto& y) { y = x.exp(); });
    case UnaryOp::log: return apply([](const auto& x, auto& y) { y = x.log(); });
    case UnaryOp::tanh: return apply([](const auto& x, auto& y) { y = x.tanh(); });
    // 1 / (1 + exp(-x)) as the scalar path has it: Eigen's logistic() loses its relative accuracy
    // in the far negative tail (thousands of ulps below x = -17).
    case UnaryOp::sigmoid:
      return apply([](const auto& x, auto& y) { y = (T(1) + (-x).exp()).inverse(); });
    case UnaryOp::silu: return apply([](const auto& x, auto& y) { y = x / (T(1) + (-x).exp()); });
    default: throw std::logic_error("[unary] no vector form");
  }
}

// dx = dy * s * (1 + x (1 - s)), s = sigmoid(x), over n contiguous elements (dx may alias x, dy).
template <class T> void vectorised_silu_backward(T* pdx, const T* px, const T* pdy, int64_t n) {
  for_each_block(n, kParallelGrain, [&](int64_t b, int64_t len) {
    const ConstArrayMap<T> x(px + b, len), dy(pdy + b, len);
    const Eigen::Array<T, Eigen::Dynamic, 1> s = (T(1) + (-x).exp()).inverse();
    ArrayMap<T>(pdx + b, len) = dy * s * (T(1) + x * (T(1) - s));
  });
}

}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& y, double exponent) {
  visit_f32_f64(x.dtype(), unary_op_name(op), [&](auto tag) {
    using T = decltype(tag);
    if (has_vector_form(op)) {
      const int64_t n = y.numel();
      on_contiguous<T>(
          y, [&](T* py, const T* px) { vectorised_unary(op, py, px, n); }, x);
      return;
    }
    const T* px = static_cast<const T*>(x.data_ptr());
    T* py = static_cast<T*>(y.data_ptr());
    with_unary_fn<T>(op, static_cast<T>(exponent), [&](auto f) {
      for_each_element(
          y, [=](int64_t o, int64_t i) { py[o] = f(px[i]); }, x);
    });
  });
}

void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy,
                    const Tensor& dx, double exponent) {
  visit_f32_f64(x.dtype(), unary_op_name(op), [&](auto tag) {
    using T = decltype(tag);
    if (op == UnaryOp::silu) {  // the only backward with a transcendental function
      const int64_t n = dx.numel();
      on_contiguous<T>(
          dx, [&](T* pdx, const T* px, const T* pdy) { vectorised_silu_backward(pdx, px, pdy, n); },
          x, dy);
      return;
    }
    const T* px = static_cast<const T*>(x.data_ptr());
    const T* py = static_cast<const T*>(y.data_ptr());
    const T* pdy = static_cast<const T*>(dy.data_ptr());
    T* pdx = static_cast<T*>(dx.data_ptr());
    with_unary_grad<T>(op, static_cast<T>(exponent), [&](auto g) {
      for_each_element(
          dx, [=](int64_t o, int64_t i, int64_t j, int64_t k) { pdx[o] = g(px[i], py[j], pdy[k]); },
          x, y, dy);
    });
  });
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  visit_f32_f64(out.dtype(), binary_op_name(op), [&](auto tag) {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a.data_ptr());
    const T* pb = static_cast<const T*>(b.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    with_binary_fn<T>(op, [&](auto f) {
      for_each_element(
          out, [=](int64_t o, int64_t i, int64_t j) { po[o] = f(pa[i], pb[j]); }, a, b);
    });
  });
}

void binary_scalar(BinaryOp op, const Tensor& x, double s, bool scalar_first, const Tensor& out) {
  visit_f32_f64(out.dtype(), binary_op_name(op), [&](auto tag) {
    using T = decltype(tag);
    const T* px = static_cast<const T*>(x.data_ptr());
    T* po = static_cast<T*>(out.data_ptr());
    const T v = static_cast<T>(s);
    with_binary_fn<T>(op, [&](auto f) {
      if (scalar_first)
        for_each_element(
            out, [=](int64_t o, int64_t i) { po[o] = f(v, px[i]); }, x);
      else
        for_each_element(
            out, [=](int64_t o, int64_t i) { po[o] = f(px[i], v); }, x);
    });
  });
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  visit_element_size(out.dtype(), [&](auto tag) {
    using U = decltype(tag);
    const bool* pc = cond.data<bool>();
    const U* pa = static_cast<const U*>(a.data_ptr());
    const U* pb = static_cast<const U*>(b.data_ptr());
    U* po = static_cast<U*>(out.data_ptr());
    for_each_element(
        out, [=](int64_t o, int64_t c, int64_t i, int64_t j) { po[o] = pc[c] ? pa[i] : pb[j]; },
        cond, a, b);
  });
}

}  // namespace sprig::cpu
