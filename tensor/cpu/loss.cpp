// CPU cross-entropy and forward KL divergence over rows of logits, forward and backward.
// Shapes: logits / teacher / student [R, V]; targets [R]; per-row outputs [R] in S (f32, or f64
// for f64 inputs). Logits are read in their own dtype (bf16/f16 included) one row at a time with
// A = acc_t<T> math, so no f32 copy of a [R, V] tensor is ever made.
// Backward rule: `=` into the logits gradients (activation gradients).
// Exponentials of whole rows go through Eigen's vectorised exp (within an ulp or two of std::exp);
// 16-bit rows are converted to their accumulation type first, so they compute exactly like f32
// rows of the same values.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "tensor/cpu/eigen_arrays.h"
#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

namespace {

// The row in the accumulation type A: itself, or its conversion into `buffer`.
template <class A, class T> const A* row_in(const T* row, int64_t V, ScratchBuffer<A>& buffer) {
  if constexpr (std::is_same_v<T, A>) {
    return row;
  } else {
    buffer.resize(static_cast<size_t>(V));
    for (int64_t v = 0; v < V; ++v) buffer[static_cast<size_t>(v)] = convert<A>(row[v]);
    return buffer.data();
  }
}

// log(sum_v exp(row[v] / temperature)), stable (max subtracted first); the row's maximum goes to
// `max` when asked for. Dividing by a positive temperature keeps the order, so max(row) /
// temperature is exactly the maximum of the divided row.
template <class A> A row_lse(const A* row, int64_t V, A temperature, A* max = nullptr) {
  const A top = ConstArrayMap<A>(row, V).maxCoeff();
  if (max) *max = top;
  const A m = top / temperature;
  return m + std::log((ConstArrayMap<A>(row, V) / temperature - m).exp().sum());
}

// A row of V values computed in A by fill(ArrayMap<A>&), stored into `out` (T): in place when T is
// A, else through `buffer` and a conversion.
template <class A, class T, class F>
void write_row(T* out, int64_t V, ScratchBuffer<A>& buffer, F&& fill) {
  if constexpr (std::is_same_v<T, A>) {
    ArrayMap<A> row(out, V);
    fill(row);
  } else {
    buffer.resize(static_cast<size_t>(V));
    ArrayMap<A> row(buffer.data(), V);
    fill(row);
    for (int64_t v = 0; v < V; ++v) out[v] = convert<T>(buffer[static_cast<size_t>(v)]);
  }
}

// Index of the first entry of a row equal to `value` (its maximum: the first argmax).
template <class A> int64_t first_index_of(const A* row, int64_t V, A value) {
  for (int64_t v = 0; v < V; ++v)
    if (row[v] == value) return v;
  return 0;
}

// The corrected row c = b + d in A, each sum rounded to T as adding d into b in place stores it.
template <class A, class T> void corrected_row(const A* b, const T* d, int64_t V, A* c) {
  for (int64_t v = 0; v < V; ++v) c[v] = convert<A>(convert<T>(b[v] + convert<A>(d[v])));
}

}  // namespace

// ---- cross-entropy ------------------------------------------------------------------------------

void cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& loss,
                   const Tensor& lse, const Tensor& argmax, int64_t ignore_index) {
  const int64_t R = logits.size(0), V = logits.size(1);
  const std::vector<int64_t> target = targets.to_vector<int64_t>();
  visit_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* lp = logits.data<T>();
    A* loss_p = loss.data<A>();
    A* lse_p = lse.data<A>();
    int64_t* argmax_p = argmax.defined() ? argmax.data<int64_t>() : nullptr;
#pragma omp parallel for if (R * V > kParallelGrain)
    for (int64_t r = 0; r < R; ++r) {
      thread_local ScratchBuffer<A> buffer;
      const A* row = row_in<A>(lp + r * V, V, buffer);
      A max = 0;
      lse_p[r] = row_lse(row, V, A(1), &max);
      loss_p[r] = target[r] == ignore_index ? A(0) : lse_p[r] - row[target[r]];
      if (argmax_p) argmax_p[r] = first_index_of(row, V, max);
    }
  });
}

void cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, const Tensor& dlogits, int64_t ignore_index) {
  const int64_t R = logits.size(0), V = logits.size(1);
  const std::vector<int64_t> target = targets.to_vector<int64_t>();
  visit_floating(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* lp = logits.data<T>();
    const A* dloss_p = dloss.data<A>();
    const A* lse_p = lse.data<A>();
    T* dp = dlogits.data<T>();
    // dlogits = dloss * (softmax - onehot(target)); ignored rows get 0.
#pragma omp parallel for if (R * V > kParallelGrain)
    for (int64_t r = 0; r < R; ++r) {
      const bool ignored = target[r] == ignore_index;
      if (ignored) {
        for (int64_t v = 0; v < V; ++v) dp[r * V + v] = convert<T>(A(0));
        continue;
      }
      thread_local ScratchBuffer<A> row_buffer, g_buffer;
      const A* row = row_in<A>(lp + r * V, V, row_buffer);
      write_row(dp + r * V, V, g_buffer, [&](ArrayMap<A>& g) {
        g = dloss_p[r] * (ConstArrayMap<A>(row, V) - lse_p[r]).exp();
        g(target[r]) -= dloss_p[r];
      });
    }
  });
}

// ---- Domino's pair: base and corrected logits -------------------------------------------------

void corrected_cross_entropy(const Tensor& base, const Tensor& delta, const Tensor& targets,
                             const Tensor& loss, const Tensor& lse, const Tensor& argmax,
                             int64_t ignore_index) {
  const int64_t R = base.size(0), V = base.size(1);
  const std::vector<int64_t> target = targets.to_vector<int64_t>();
  visit_floating(base.dtype(), "corrected_cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* bp = base.data<T>();
    const T* dp = delta.data<T>();
    A* loss_p = loss.data<A>();
    A* lse_p = lse.data<A>();
    int64_t* argmax_p = argmax.defined() ? argmax.data<int64_t>() : nullptr;
#pragma omp parallel for if (R * V > kParallelGrain)
    for (int64_t r = 0; r < R; ++r) {
      thread_local ScratchBuffer<A> b_buffer, c_buffer;
      const A* b = row_in<A>(bp + r * V, V, b_buffer);
      c_buffer.resize(static_cast<size_t>(V));
      corrected_row(b, dp + r * V, V, c_buffer.data());
      const A* rows[2] = {b, c_buffer.data()};
      for (int64_t i = 0; i < 2; ++i) {
        A max = 0;
        const int64_t at = i * R + r;
        lse_p[at] = row_lse(rows[i], V, A(1), &max);
        loss_p[at] = target[r] == ignore_index ? A(0) : lse_p[at] - rows[i][target[r]];
        if (argmax_p) argmax_p[at] = first_index_of(rows[i], V, max);
      }
    }
  });
}

void corrected_cross_entropy_backward(const Tensor& dloss, const Tensor& base, const Tensor& delta,
                                      const Tensor& targets, const Tensor& lse, const Tensor& dbase,
                                      const Tensor& ddelta, int64_t ignore_index) {
  const int64_t R = base.size(0), V = base.size(1);
  const std::vector<int64_t> target = targets.to_vector<int64_t>();
  visit_floating(base.dtype(), "corrected_cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* bp = base.data<T>();
    const T* dp = delta.data<T>();
    T* gbp = dbase.data<T>();
    T* gdp = ddelta.data<T>();
    const A* dloss_p = dloss.data<A>();
    const A* lse_p = lse.data<A>();
#pragma omp parallel for if (R * V > kParallelGrain)
    for (int64_t r = 0; r < R; ++r) {
      if (target[r] == ignore_index) {
        std::fill(gbp + r * V, gbp + (r + 1) * V, convert<T>(A(0)));
        std::fill(gdp + r * V, gdp + (r + 1) * V, convert<T>(A(0)));
        continue;
      }
      // Both rows are read (into buffers, or as A in place) before either output row is written:
      // the outputs may be the inputs.
      thread_local ScratchBuffer<A> b_buffer, c_buffer, g_buffer;
      const A* b = row_in<A>(bp + r * V, V, b_buffer);
      c_buffer.resize(static_cast<size_t>(V));
      corrected_row(b, dp + r * V, V, c_buffer.data());
      ArrayMap<A> dc(c_buffer.data(), V);
      const A g0 = dloss_p[r], g1 = dloss_p[R + r];
      dc = g1 * (dc - lse_p[R + r]).exp();
      dc(target[r]) -= g1;
      write_row(gbp + r * V, V, g_buffer, [&](ArrayMap<A>& g) {
        g = g0 * (ConstArrayMap<A>(b, V) - lse_p[r]).exp() + dc;
        g(target[r]) -= g0;
      });
      write_row(gdp + r * V, V, g_buffer, [&](ArrayMap<A>& g) { g = dc; });
    }
  });
}

// ---- KL divergence ------------------------------------------------------------------------------

void kl_div(const Tensor& teacher, const Tensor& student, const Tensor& kl,
            const Tensor& teacher_lse, const Tensor& student_lse, double temperature) {
  const int64_t R = teacher.size(0), V = teacher.size(1);
  visit_floating(teacher.dtype(), "kl_div", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const A temp = A(temperature);
    const T* tp = teacher.data<T>();
    const T* sp = student.data<T>();
    A* kl_p = kl.data<A>();
    A* tl_p = teacher_lse.data<A>();
    A* sl_p = student_lse.data<A>();
    // kl = sum_v p (log p - log q), p = softmax(teacher / T), q = softmax(student / T); terms with
    // p == 0 contribute 0 (also when log p is -inf).
#pragma omp parallel for if (R * V > kParallelGrain)
    for (int64_t r = 0; r < R; ++r) {
      thread_local ScratchBuffer<A> t_buffer, s_buffer, log_p_buffer, p_buffer;
      const A* t_row = row_in<A>(tp + r * V, V, t_buffer);
      const A* s_row = row_in<A>(sp + r * V, V, s_buffer);
      const A t_lse = row_lse(t_row, V, temp), s_lse = row_lse(s_row, V, temp);
      log_p_buffer.resize(static_cast<size_t>(V));
      p_buffer.resize(static_cast<size_t>(V));
      ArrayMap<A> log_p(log_p_buffer.data(), V), p(p_buffer.data(), V);
      log_p = ConstArrayMap<A>(t_row, V) / temp - t_lse;
      p = log_p.exp();
      const auto log_q = ConstArrayMap<A>(s_row, V) / temp - s_lse;
      kl_p[r] = (p > A(0)).select(p * (log_p - log_q), A(0)).sum();
      tl_p[r] = t_lse;
      sl_p[r] = s_lse;
    }
  });
}

void kl_div_backward(const Tensor& dkl, const Tensor& teacher, const Tensor& student,
                     const Tensor& teacher_lse, const Tensor& student_lse, const Tensor& dstudent,
                     double temperature) {
  const int64_t R = teacher.size(0), V = teacher.size(1);
  visit_floating(teacher.dtype(), "kl_div_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const A temp = A(temperature);
    const T* tp = teacher.data<T>();
    const T* sp = student.data<T>();
    const A* dkl_p = dkl.data<A>();
    const A* tl_p = teacher_lse.data<A>();
    const A* sl_p = student_lse.data<A>();
    T* dp = dstudent.data<T>();
    // dstudent = dkl * (q - p) / T.
#pragma omp parallel for if (R * V > kParallelGrain)
    for (int64_t r = 0; r < R; ++r) {
      thread_local ScratchBuffer<A> t_buffer, s_buffer, g_buffer;
      const A* t_row = row_in<A>(tp + r * V, V, t_buffer);
      const A* s_row = row_in<A>(sp + r * V, V, s_buffer);
      write_row(dp + r * V, V, g_buffer, [&](ArrayMap<A>& g) {
        g = (dkl_p[r] / temp) * ((ConstArrayMap<A>(s_row, V) / temp - sl_p[r]).exp() -
                                 (ConstArrayMap<A>(t_row, V) / temp - tl_p[r]).exp());
      });
    }
  });
}

}  // namespace sprig::cpu
