// CPU cross-entropy and forward KL divergence over rows of logits, forward and backward.
// Shapes: logits / teacher / student [R, V]; targets [R]; per-row outputs [R] in S (f32, or f64
// for f64 inputs). Logits are read in their own dtype (bf16/f16 included) one row at a time with
// A = acc_t<T> math, so no f32 copy of a [R, V] tensor is ever made.
// Backward rule: `=` into the logits gradients (activation gradients).
#include <algorithm>
#include <cmath>

#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

namespace {

// log(sum_v exp(row[v] / temperature)), stable (max subtracted first).
template <class A, class T> A row_lse(const T* row, int64_t V, A temperature) {
  A m = -INFINITY;
  for (int64_t v = 0; v < V; ++v) m = std::max(m, convert<A>(row[v]) / temperature);
  A s = 0;
  for (int64_t v = 0; v < V; ++v) s += std::exp(convert<A>(row[v]) / temperature - m);
  return m + std::log(s);
}

// Index of the first maximum of a row.
template <class T> int64_t row_argmax(const T* row, int64_t V) {
  int64_t best = 0;
  for (int64_t v = 1; v < V; ++v)
    if (convert<acc_t<T>>(row[v]) > convert<acc_t<T>>(row[best])) best = v;
  return best;
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
      const T* row = lp + r * V;
      lse_p[r] = row_lse(row, V, A(1));
      loss_p[r] = target[r] == ignore_index ? A(0) : lse_p[r] - convert<A>(row[target[r]]);
      if (argmax_p) argmax_p[r] = row_argmax(row, V);
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
      for (int64_t v = 0; v < V; ++v) {
        const A p = std::exp(convert<A>(lp[r * V + v]) - lse_p[r]);
        const A g = dloss_p[r] * (p - (v == target[r] ? A(1) : A(0)));
        dp[r * V + v] = convert<T>(ignored ? A(0) : g);
      }
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
      const T* t_row = tp + r * V;
      const T* s_row = sp + r * V;
      const A t_lse = row_lse(t_row, V, temp), s_lse = row_lse(s_row, V, temp);
      A sum = 0;
      for (int64_t v = 0; v < V; ++v) {
        const A log_p = convert<A>(t_row[v]) / temp - t_lse;
        const A p = std::exp(log_p);
        if (p > A(0)) sum += p * (log_p - (convert<A>(s_row[v]) / temp - s_lse));
      }
      kl_p[r] = sum;
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
      const A scale = dkl_p[r] / temp;
      for (int64_t v = 0; v < V; ++v) {
        const int64_t i = r * V + v;
        const A p = std::exp(convert<A>(tp[i]) / temp - tl_p[r]);
        const A q = std::exp(convert<A>(sp[i]) / temp - sl_p[r]);
        dp[i] = convert<T>(scale * (q - p));
      }
    }
  });
}

}  // namespace sprig::cpu
