// CUDA elementwise kernels, twins of tensor/cpu/elementwise.cpp (same contracts): unary ops and
// their backward, binary ops (tensor-tensor and tensor-scalar) and where.
//
// Layout: every operand has out's shape, with any strides (broadcast operands have stride 0).
// Element i (row-major over out's shape) of each operand is at index i when all operands are
// contiguous, else at its StridedIndex offset. One thread per element, grid-stride loops.
// Math is in float for f32/bf16/f16 and in double for f64; where copies raw element bits.
// Backward rule: unary_backward writes (`=`) the activation gradient dx.
#include "tensor/cuda/strided.cuh"

namespace sprig::cuda {

namespace {

constexpr int kThreads = 256;

#define GRID_STRIDE_LOOP(i, n)                                              \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// Position of element i in an operand.
__device__ __forceinline__ int64_t at(const StridedIndex& s, int64_t i, bool contiguous) {
  return contiguous ? i : s.offset(i);
}

template <class C> __device__ __forceinline__ C sigmoid_of(C x) {
  return C(1) / (C(1) + ::exp(-x));
}

template <class C> __device__ C unary_fn(UnaryOp op, C x, C p) {
  switch (op) {
    case UnaryOp::neg: return -x;
    case UnaryOp::exp: return ::exp(x);
    case UnaryOp::log: return ::log(x);
    case UnaryOp::sqrt: return ::sqrt(x);
    case UnaryOp::rsqrt: return ::rsqrt(x);
    case UnaryOp::tanh: return ::tanh(x);
    case UnaryOp::sigmoid: return sigmoid_of(x);
    case UnaryOp::silu: return x * sigmoid_of(x);
    case UnaryOp::pow: return ::pow(x, p);
    case UnaryOp::abs: return ::fabs(x);
  }
  return x;
}

// dy * op'(x), with y = op(x).
template <class C> __device__ C unary_grad(UnaryOp op, C x, C y, C dy, C p) {
  switch (op) {
    case UnaryOp::neg: return -dy;
    case UnaryOp::exp: return dy * y;
    case UnaryOp::log: return dy / x;
    case UnaryOp::sqrt: return dy * C(0.5) / y;
    case UnaryOp::rsqrt: return dy * C(-0.5) * y * y * y;
    case UnaryOp::tanh: return dy * (C(1) - y * y);
    case UnaryOp::sigmoid: return dy * y * (C(1) - y);
    case UnaryOp::silu: {
      const C s = sigmoid_of(x);
      return dy * s * (C(1) + x * (C(1) - s));
    }
    case UnaryOp::pow: return p == C(0) ? C(0) : dy * p * ::pow(x, p - C(1));
    case UnaryOp::abs: return x > C(0) ? dy : (x < C(0) ? -dy : C(0));
  }
  return dy;
}

template <class C> __device__ __forceinline__ C binary_fn(BinaryOp op, C a, C b) {
  switch (op) {
    case BinaryOp::add: return a + b;
    case BinaryOp::sub: return a - b;
    case BinaryOp::mul: return a * b;
    case BinaryOp::div: return a / b;
  }
  return a;
}

template <class T>
__global__ void unary_kernel(UnaryOp op, const T* x, StridedIndex xs, T* y, StridedIndex ys,
                             int64_t n, bool contiguous, acc_t<T> p) {
  GRID_STRIDE_LOOP(i, n) {
    const acc_t<T> v = to_acc(x[at(xs, i, contiguous)]);
    y[at(ys, i, contiguous)] = from_acc<T>(unary_fn(op, v, p));
  }
}

template <class T>
__global__ void unary_backward_kernel(UnaryOp op, const T* x, StridedIndex xs, const T* y,
                                      StridedIndex ys, const T* dy, StridedIndex dys, T* dx,
                                      int64_t n, bool contiguous, acc_t<T> p) {
  using C = acc_t<T>;
  GRID_STRIDE_LOOP(i, n) {
    dx[i] = from_acc<T>(unary_grad(op, to_acc(x[at(xs, i, contiguous)]),
                                   to_acc(y[at(ys, i, contiguous)]),
                                   to_acc(dy[at(dys, i, contiguous)]), p));
  }
}

template <class T>
__global__ void binary_kernel(BinaryOp op, const T* a, StridedIndex as, const T* b, StridedIndex bs,
                              T* out, int64_t n, bool contiguous) {
  using C = acc_t<T>;
  GRID_STRIDE_LOOP(i, n) {
    out[i] = from_acc<T>(
        binary_fn(op, to_acc(a[at(as, i, contiguous)]), to_acc(b[at(bs, i, contiguous)])));
  }
}

template <class T>
__global__ void binary_scalar_kernel(BinaryOp op, const T* x, StridedIndex xs, acc_t<T> s,
                                     bool scalar_first, T* out, StridedIndex os, int64_t n,
                                     bool contiguous) {
  GRID_STRIDE_LOOP(i, n) {
    const acc_t<T> v = to_acc(x[at(xs, i, contiguous)]);
    out[at(os, i, contiguous)] =
        from_acc<T>(scalar_first ? binary_fn(op, s, v) : binary_fn(op, v, s));
  }
}

template <class U>
__global__ void where_kernel(const bool* cond, StridedIndex cs, const U* a, StridedIndex as,
                             const U* b, StridedIndex bs, U* out, int64_t n, bool contiguous) {
  GRID_STRIDE_LOOP(i, n) {
    out[i] = cond[at(cs, i, contiguous)] ? a[at(as, i, contiguous)] : b[at(bs, i, contiguous)];
  }
}

#undef GRID_STRIDE_LOOP

template <class T> T* ptr(const Tensor& t) { return static_cast<T*>(t.data_ptr()); }

// Calls f(U{}) with U an unsigned integer of the element size of `t`.
template <class F> void visit_element_size(DType t, F&& f) {
  switch (dtype_size(t)) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    default: f(uint64_t{}); return;
  }
}

}  // namespace

void unary(UnaryOp op, const Tensor& x, const Tensor& y, double exponent, cudaStream_t stream) {
  const int64_t n = y.numel();
  if (n == 0) return;
  const bool contiguous = x.is_contiguous() && y.is_contiguous();
  visit_floating(x.dtype(), unary_op_name(op), [&](auto tag) {
    using T = decltype(tag);
    launch(unary_kernel<T>, grid_for(n, kThreads), kThreads, 0, stream, op, ptr<T>(x),
           StridedIndex(x), ptr<T>(y), StridedIndex(y), n, contiguous,
           static_cast<acc_t<T>>(exponent));
  });
  CUDA_CHECK(cudaGetLastError());
}

void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy,
                    const Tensor& dx, double exponent, cudaStream_t stream) {
  const int64_t n = dx.numel();
  if (n == 0) return;
  const bool contiguous = x.is_contiguous() && y.is_contiguous() && dy.is_contiguous();
  visit_floating(x.dtype(), unary_op_name(op), [&](auto tag) {
    using T = decltype(tag);
    launch(unary_backward_kernel<T>, grid_for(n, kThreads), kThreads, 0, stream, op, ptr<T>(x),
           StridedIndex(x), ptr<T>(y), StridedIndex(y), ptr<T>(dy), StridedIndex(dy), ptr<T>(dx), n,
           contiguous, static_cast<acc_t<T>>(exponent));
  });
  CUDA_CHECK(cudaGetLastError());
}

void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, cudaStream_t stream) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const bool contiguous = a.is_contiguous() && b.is_contiguous();
  visit_floating(out.dtype(), binary_op_name(op), [&](auto tag) {
    using T = decltype(tag);
    launch(binary_kernel<T>, grid_for(n, kThreads), kThreads, 0, stream, op, ptr<T>(a),
           StridedIndex(a), ptr<T>(b), StridedIndex(b), ptr<T>(out), n, contiguous);
  });
  CUDA_CHECK(cudaGetLastError());
}

void binary_scalar(BinaryOp op, const Tensor& x, double s, bool scalar_first, const Tensor& out,
                   cudaStream_t stream) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const bool contiguous = x.is_contiguous() && out.is_contiguous();
  visit_floating(out.dtype(), binary_op_name(op), [&](auto tag) {
    using T = decltype(tag);
    launch(binary_scalar_kernel<T>, grid_for(n, kThreads), kThreads, 0, stream, op, ptr<T>(x),
           StridedIndex(x), static_cast<acc_t<T>>(s), scalar_first, ptr<T>(out), StridedIndex(out),
           n, contiguous);
  });
  CUDA_CHECK(cudaGetLastError());
}

void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out,
           cudaStream_t stream) {
  const int64_t n = out.numel();
  if (n == 0) return;
  const bool contiguous = cond.is_contiguous() && a.is_contiguous() && b.is_contiguous();
  visit_element_size(out.dtype(), [&](auto tag) {
    using U = decltype(tag);
    launch(where_kernel<U>, grid_for(n, kThreads), kThreads, 0, stream, ptr<bool>(cond),
           StridedIndex(cond), ptr<U>(a), StridedIndex(a), ptr<U>(b), StridedIndex(b), ptr<U>(out),
           n, contiguous);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sprig::cuda
