// CPU SwiGLU, silu(gate) * up, forward and backward, any shape (contiguous), computed in
// A = acc_t<T> from elements read in their own dtype. Blocks of elements go through Eigen's
// vectorised exp (results within 4 f32 ulps of the exact ones, tests/tensor/vector_math_test.cpp);
// 16-bit blocks are converted to A first, so they compute exactly like f32 blocks of the same
// values.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "tensor/cpu/eigen_arrays.h"
#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

namespace {

// `len` elements of p as A: p itself, or their conversion into `buffer`.
template <class A, class T>
ConstArrayMap<A> read(const T* p, int64_t len, ScratchBuffer<A>& buffer) {
  if constexpr (std::is_same_v<T, A>) {
    return ConstArrayMap<A>(p, len);
  } else {
    buffer.resize(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) buffer[static_cast<size_t>(i)] = convert<A>(p[i]);
    return ConstArrayMap<A>(buffer.data(), len);
  }
}

// Stores `values` (len) into p: evaluated in place for A, else through `buffer` and a conversion.
template <class A, class T, class E>
void write(T* p, int64_t len, const E& values, ScratchBuffer<A>& buffer) {
  if constexpr (std::is_same_v<T, A>) {
    ArrayMap<A>(p, len) = values;
  } else {
    buffer.resize(static_cast<size_t>(len));
    ArrayMap<A>(buffer.data(), len) = values;
    for (int64_t i = 0; i < len; ++i) p[i] = convert<T>(buffer[static_cast<size_t>(i)]);
  }
}

}  // namespace

void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out) {
  visit_floating(gate.dtype(), "swiglu", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* gp = gate.data<T>();
    const T* up_p = up.data<T>();
    T* op = out.data<T>();
    for_each_block(gate.numel(), kParallelGrain, [&](int64_t i0, int64_t len) {
      thread_local ScratchBuffer<A> gb, ub, ob;
      const ConstArrayMap<A> g = read(gp + i0, len, gb), u = read(up_p + i0, len, ub);
      write(op + i0, len, g / (A(1) + (-g).exp()) * u, ob);
    });
  });
}

void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                     const Tensor& dup) {
  visit_floating(gate.dtype(), "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* gp = gate.data<T>();
    const T* up_p = up.data<T>();
    const T* dop = dout.data<T>();
    T* dgp = dgate.data<T>();
    T* dup_p = dup.data<T>();
    // silu'(g) = s * (1 + g * (1 - s)) with s = sigmoid(g).
    for_each_block(gate.numel(), kParallelGrain, [&](int64_t i0, int64_t len) {
      thread_local ScratchBuffer<A> gb, ub, db, sb, dgb, ob;
      const ConstArrayMap<A> g = read(gp + i0, len, gb), u = read(up_p + i0, len, ub),
                             d = read(dop + i0, len, db);
      sb.resize(static_cast<size_t>(len));
      ArrayMap<A> s(sb.data(), len);
      s = A(1) / (A(1) + (-g).exp());
      // Both outputs are computed before either is stored: they may alias the inputs.
      dgb.resize(static_cast<size_t>(len));
      ArrayMap<A> dg(dgb.data(), len);
      dg = d * u * s * (A(1) + g * (A(1) - s));
      write(dup_p + i0, len, d * g * s, ob);
      write(dgp + i0, len, dg, ob);
    });
  });
}

}  // namespace sprig::cpu
