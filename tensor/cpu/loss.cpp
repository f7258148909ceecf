// CPU cross-entropy, Domino's corrected pair and forward KL divergence over rows of logits,
// forward and backward. Shapes: logits / student [R, V] (teacher [R, V], or rows named by index);
// targets [R]; per-row outputs [R] in S (f32, or f64 for f64 inputs). Logits are read in their own
// dtype (bf16/f16 included) one row or tile at a time with A = acc_t<T> math, so no f32 copy of a
// [R, V] tensor is ever made.
// Backward rule: `=` into the logits gradients (activation gradients).
// Exponentials of whole rows go through Eigen's vectorised exp (within an ulp or two of std::exp);
// 16-bit rows are converted to their accumulation type first, so they compute exactly like f32
// rows of the same values.
#include <algorithm>
#include <cmath>
#include <limits>
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
  const ConstArrayMap<A> x(row, V);
  // x / 1 == x exactly: the division (a slow vector instruction) only when it changes something.
  if (temperature == A(1)) return m + std::log((x - m).exp().sum());
  return m + std::log((x / temperature - m).exp().sum());
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

// Index of the first entry of a row equal to `value`, its maximum (the first argmax; 0 when none
// is, as for a NaN maximum). Runs of 64 whose maximum is below `value` are skipped with vectorised
// maxima; the first run that reaches it holds the index.
template <class A> int64_t first_index_of(const A* row, int64_t V, A value) {
  constexpr int64_t kRun = 64;
  int64_t v0 = 0;
  while (v0 + kRun <= V &&
         ConstArrayMap<A>(row + v0, kRun).template maxCoeff<Eigen::PropagateNumbers>() != value)
    v0 += kRun;
  for (int64_t v = v0; v < V; ++v)
    if (row[v] == value) return v;
  return 0;
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
    // dlogits = dloss * (softmax - onehot(target)); ignored rows get 0. dp may be lp: each element
    // is read (or its row copied) before it is written.
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
//
// c = b + e @ P^T, with features e [R, E] and the projection P [V, E]. The corrections of one tile
// (a block of rows by a group of vocabulary columns) are a small GEMM into a scratch tile that
// stays in cache: the [R, V] corrections are never stored, and P's group is read once per block
// of rows. The tiling depends on the shapes alone, so results do not depend on the thread count.

namespace {

constexpr int64_t kCorrectedRows = 64;       // rows per tile
constexpr int64_t kCorrectedColumns = 1024;  // vocabulary columns per tile

template <class A>
using RowMajor = Eigen::Matrix<A, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class A> using MatrixMap = Eigen::Map<RowMajor<A>>;
template <class A> using ConstMatrixMap = Eigen::Map<const RowMajor<A>>;

// The tensor's values in A: its own buffer, or a converted copy kept in `copy`.
template <class A> const A* values_in(const Tensor& t, Tensor& copy) {
  copy = t.dtype() == dtype_of<A>() ? t : t.to(dtype_of<A>());
  return copy.data<A>();
}

// One tile's scratch: its rows of b in A (b_rows, pointing into b or into b_converted) and its
// corrected logits c [n, w].
template <class A> struct CorrectedTile {
  ScratchBuffer<A> c, b_converted;
  std::vector<const A*> b_rows;
};

// Loads the tile of rows [r0, r0 + n) by columns [v0, v0 + w): its rows of b, and
// c = b + (e @ P^T rounded to T), the sum rounded to T, as adding a GEMM's T output into b in
// place stores it. e: features [R, E]; p: P [V, E].
template <class T, class A>
void load_corrected_tile(const T* b, int64_t V, const A* e, const A* p, int64_t E, int64_t r0,
                         int64_t n, int64_t v0, int64_t w, CorrectedTile<A>& tile) {
  tile.b_rows.resize(static_cast<size_t>(n));
  if constexpr (!std::is_same_v<T, A>) tile.b_converted.resize(static_cast<size_t>(n * w));
  for (int64_t i = 0; i < n; ++i) {
    const T* row = b + (r0 + i) * V + v0;
    if constexpr (std::is_same_v<T, A>) {
      tile.b_rows[i] = row;
    } else {
      A* converted = tile.b_converted.data() + i * w;
      for (int64_t v = 0; v < w; ++v) converted[v] = convert<A>(row[v]);
      tile.b_rows[i] = converted;
    }
  }
  tile.c.resize(static_cast<size_t>(n * w));
  MatrixMap<A>(tile.c.data(), n, w).noalias() =
      ConstMatrixMap<A>(e + r0 * E, n, E) * ConstMatrixMap<A>(p + v0 * E, w, E).transpose();
  for (int64_t i = 0; i < n; ++i) {
    const A* bi = tile.b_rows[i];
    A* ci = tile.c.data() + i * w;
    if constexpr (std::is_same_v<T, A>) {
      ArrayMap<A>(ci, w) += ConstArrayMap<A>(bi, w);
    } else {
      for (int64_t v = 0; v < w; ++v) ci[v] = round_to<T>(bi[v] + round_to<T>(ci[v]));
    }
  }
}

// A row's log-sum-exp and first argmax over its columns taken group by group, in order: with one
// group, exactly row_lse's max + log(sum(exp(x - max))).
template <class A> struct OnlineLse {
  A max = -std::numeric_limits<A>::infinity(), sum = 0;
  int64_t argmax = 0;

  void add(const A* x, int64_t w, int64_t v0) {
    const A m = ConstArrayMap<A>(x, w).maxCoeff();
    if (m > max) {
      sum *= std::exp(max - m);
      max = m;
      argmax = v0 + first_index_of(x, w, m);
    }
    sum += (ConstArrayMap<A>(x, w) - max).exp().sum();
  }
  A lse() const { return max + std::log(sum); }
};

}  // namespace

void corrected_cross_entropy(const Tensor& base, const Tensor& features, const Tensor& proj,
                             const Tensor& targets, const Tensor& loss, const Tensor& lse,
                             const Tensor& argmax, int64_t ignore_index) {
  const int64_t R = base.size(0), V = base.size(1), E = features.size(1);
  const std::vector<int64_t> target = targets.to_vector<int64_t>();
  visit_floating(base.dtype(), "corrected_cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    Tensor e_copy, p_copy;
    const A* e = values_in<A>(features, e_copy);
    const A* p = values_in<A>(proj, p_copy);
    const T* bp = base.data<T>();
    A* loss_p = loss.data<A>();
    A* lse_p = lse.data<A>();
    int64_t* argmax_p = argmax.defined() ? argmax.data<int64_t>() : nullptr;
    const int64_t blocks = (R + kCorrectedRows - 1) / kCorrectedRows;
    // Each block of rows walks the vocabulary one column group at a time.
#pragma omp parallel for schedule(dynamic, 1) if (R * V > kParallelGrain)
    for (int64_t block = 0; block < blocks; ++block) {
      const int64_t r0 = block * kCorrectedRows, n = std::min(kCorrectedRows, R - r0);
      thread_local CorrectedTile<A> tile;
      OnlineLse<A> stats[2][kCorrectedRows];
      A at_target[2][kCorrectedRows] = {};
      for (int64_t v0 = 0; v0 < V; v0 += kCorrectedColumns) {
        const int64_t w = std::min(kCorrectedColumns, V - v0);
        load_corrected_tile<T>(bp, V, e, p, E, r0, n, v0, w, tile);
        for (int64_t i = 0; i < n; ++i) {
          const A* rows[2] = {tile.b_rows[i], tile.c.data() + i * w};
          const int64_t t = target[r0 + i];
          for (int k = 0; k < 2; ++k) {
            stats[k][i].add(rows[k], w, v0);
            if (t >= v0 && t < v0 + w) at_target[k][i] = rows[k][t - v0];
          }
        }
      }
      for (int64_t i = 0; i < n; ++i)
        for (int k = 0; k < 2; ++k) {
          const int64_t at = k * R + r0 + i;
          lse_p[at] = stats[k][i].lse();
          loss_p[at] = target[r0 + i] == ignore_index ? A(0) : lse_p[at] - at_target[k][i];
          if (argmax_p) argmax_p[at] = stats[k][i].argmax;
        }
    }
  });
}

void corrected_cross_entropy_backward(const Tensor& dloss, const Tensor& base,
                                      const Tensor& features, const Tensor& proj,
                                      const Tensor& targets, const Tensor& lse, const Tensor& dbase,
                                      const Tensor& dfeatures, const Tensor& dproj,
                                      bool accumulate_dproj, int64_t ignore_index) {
  const int64_t R = base.size(0), V = base.size(1), E = features.size(1);
  const std::vector<int64_t> target = targets.to_vector<int64_t>();
  visit_floating(base.dtype(), "corrected_cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    Tensor e_copy, p_copy;
    const A* e = values_in<A>(features, e_copy);
    const A* p = values_in<A>(proj, p_copy);
    const T* bp = base.data<T>();
    T* gbp = dbase.data<T>();
    const A* dloss_p = dloss.data<A>();
    const A* lse_p = lse.data<A>();
    const int64_t groups = (V + kCorrectedColumns - 1) / kCorrectedColumns;
    // Each column group owns its columns of dbase and its rows of dproj, and writes its share of
    // dfeatures = dc @ P to its own partial; the partials are summed in group order below.
    Tensor partials = Tensor::empty({groups, R, E}, dtype_of<A>());
    A* partial_p = partials.data<A>();
    Tensor dp_acc;  // dproj in A: dproj itself, or a copy converted back at the end
    if (dproj.defined())
      dp_acc = dproj.dtype() == dtype_of<A>()
                   ? dproj
                   : (accumulate_dproj ? dproj.to(dtype_of<A>())
                                       : Tensor::empty(dproj.shape(), dtype_of<A>()));
    A* dp = dp_acc.defined() ? dp_acc.data<A>() : nullptr;
#pragma omp parallel for schedule(dynamic, 1) if (R * V > kParallelGrain)
    for (int64_t group = 0; group < groups; ++group) {
      const int64_t v0 = group * kCorrectedColumns, w = std::min(kCorrectedColumns, V - v0);
      thread_local CorrectedTile<A> tile;
      thread_local ScratchBuffer<A> g_buffer;
      for (int64_t r0 = 0; r0 < R; r0 += kCorrectedRows) {
        const int64_t n = std::min(kCorrectedRows, R - r0);
        // Every row's b is read (converted, or in place) before its dbase, which may be b, is
        // written.
        load_corrected_tile<T>(bp, V, e, p, E, r0, n, v0, w, tile);
        // dc = g1 (softmax(c) - onehot) replaces c; dbase = g0 (softmax(b) - onehot) + dc.
        for (int64_t i = 0; i < n; ++i) {
          const int64_t r = r0 + i, t = target[r] - v0;
          ArrayMap<A> dc(tile.c.data() + i * w, w);
          T* out = gbp + r * V + v0;
          if (target[r] == ignore_index) {
            dc.setZero();
            std::fill(out, out + w, convert<T>(A(0)));
            continue;
          }
          const A g0 = dloss_p[r], g1 = dloss_p[R + r];
          dc = g1 * (dc - lse_p[R + r]).exp();
          if (t >= 0 && t < w) dc(t) -= g1;
          write_row(out, w, g_buffer, [&](ArrayMap<A>& g) {
            g = g0 * (ConstArrayMap<A>(tile.b_rows[i], w) - lse_p[r]).exp() + dc;
            if (t >= 0 && t < w) g(t) -= g0;
          });
        }
        const ConstMatrixMap<A> dc(tile.c.data(), n, w), p_group(p + v0 * E, w, E);
        MatrixMap<A>(partial_p + (group * R + r0) * E, n, E).noalias() = dc * p_group;
        if (!dp) continue;
        MatrixMap<A> dp_group(dp + v0 * E, w, E);
        const auto rows_share = dc.transpose() * ConstMatrixMap<A>(e + r0 * E, n, E);
        if (r0 == 0 && !accumulate_dproj)
          dp_group.noalias() = rows_share;
        else
          dp_group.noalias() += rows_share;
      }
    }
    // dfeatures = the partials summed in group order.
    T* gf = dfeatures.data<T>();
#pragma omp parallel for if (R * E * groups > kParallelGrain)
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < E; ++k) {
        A sum = 0;
        for (int64_t group = 0; group < groups; ++group) sum += partial_p[(group * R + r) * E + k];
        gf[r * E + k] = convert<T>(sum);
      }
    if (dp && !dp_acc.shares_storage(dproj)) dproj.copy_(dp_acc);
  });
}

// ---- KL divergence ------------------------------------------------------------------------------

namespace {

// Row r's teacher row: teacher_rows[r], or r itself.
std::vector<int64_t> teacher_row_of(const Tensor& teacher_rows, int64_t R) {
  if (teacher_rows.defined()) return teacher_rows.to_vector<int64_t>();
  std::vector<int64_t> rows(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) rows[static_cast<size_t>(r)] = r;
  return rows;
}

// The row divided by the temperature, in A: the row itself at temperature 1 (x / 1 == x), else
// the quotients in `buffer`, so the math after it divides nothing.
template <class A>
const A* over_temperature(const A* row, int64_t V, A temperature, ScratchBuffer<A>& buffer) {
  if (temperature == A(1)) return row;
  buffer.resize(static_cast<size_t>(V));
  ArrayMap<A>(buffer.data(), V) = ConstArrayMap<A>(row, V) / temperature;
  return buffer.data();
}

}  // namespace

void kl_div(const Tensor& teacher, const Tensor& student, const Tensor& teacher_rows,
            const Tensor& kl, const Tensor& teacher_lse, const Tensor& student_lse,
            const Tensor& student_argmax, double temperature) {
  const int64_t R = student.size(0), V = student.size(1);
  const std::vector<int64_t> t_of = teacher_row_of(teacher_rows, R);
  visit_floating(teacher.dtype(), "kl_div", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const A temp = A(temperature);
    const T* tp = teacher.data<T>();
    const T* sp = student.data<T>();
    A* kl_p = kl.data<A>();
    A* tl_p = teacher_lse.data<A>();
    A* sl_p = student_lse.data<A>();
    int64_t* argmax_p = student_argmax.defined() ? student_argmax.data<int64_t>() : nullptr;
    // kl = sum_v p (log p - log q), p = softmax(teacher / T), q = softmax(student / T); terms with
    // p == 0 contribute 0 (also when log p is -inf). p comes from the exponentials of the
    // teacher's log-sum-exp, so each logit takes one exponential.
#pragma omp parallel for if (R * V > kParallelGrain)
    for (int64_t r = 0; r < R; ++r) {
      thread_local ScratchBuffer<A> t_buffer, s_buffer, t_scaled, s_scaled, p_buffer;
      const A* t_raw = row_in<A>(tp + t_of[static_cast<size_t>(r)] * V, V, t_buffer);
      const A* s_raw = row_in<A>(sp + r * V, V, s_buffer);
      const ConstArrayMap<A> t(over_temperature(t_raw, V, temp, t_scaled), V);
      const ConstArrayMap<A> s(over_temperature(s_raw, V, temp, s_scaled), V);
      p_buffer.resize(static_cast<size_t>(V));
      ArrayMap<A> p(p_buffer.data(), V);
      const A t_max = t.maxCoeff();
      p = (t - t_max).exp();
      const A t_sum = p.sum(), t_lse = t_max + std::log(t_sum);
      A s_max = 0;
      const A s_lse = row_lse(s.data(), V, A(1), &s_max);
      p /= t_sum;
      kl_p[r] = (p > A(0)).select(p * ((t - t_lse) - (s - s_lse)), A(0)).sum();
      tl_p[r] = t_lse;
      sl_p[r] = s_lse;
      // The first argmax of the student's own values (dividing may round two of them equal).
      if (argmax_p)
        argmax_p[r] = temp == A(1)
                          ? first_index_of(s_raw, V, s_max)
                          : first_index_of(s_raw, V, ConstArrayMap<A>(s_raw, V).maxCoeff());
    }
  });
}

void kl_div_backward(const Tensor& dkl, const Tensor& teacher, const Tensor& student,
                     const Tensor& teacher_rows, const Tensor& teacher_lse,
                     const Tensor& student_lse, const Tensor& dstudent, double temperature) {
  const int64_t R = student.size(0), V = student.size(1);
  const std::vector<int64_t> t_of = teacher_row_of(teacher_rows, R);
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
      thread_local ScratchBuffer<A> t_buffer, s_buffer, t_scaled, s_scaled, g_buffer;
      const A* t_raw = row_in<A>(tp + t_of[static_cast<size_t>(r)] * V, V, t_buffer);
      const A* s_raw = row_in<A>(sp + r * V, V, s_buffer);
      const ConstArrayMap<A> t(over_temperature(t_raw, V, temp, t_scaled), V);
      const ConstArrayMap<A> s(over_temperature(s_raw, V, temp, s_scaled), V);
      write_row(dp + r * V, V, g_buffer, [&](ArrayMap<A>& g) {
        g = (dkl_p[r] / temp) * ((s - sl_p[r]).exp() - (t - tl_p[r]).exp());
      });
    }
  });
}

}  // namespace sprig::cpu
