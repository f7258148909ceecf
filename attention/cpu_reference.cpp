// Dense reference attention on CPU: the mask materialised per batch row, plain loops in the
// tensors' own precision (f64: the test reference; f32: the naive same-precision implementation).
// Forward: s_j = scale * q.k_j over allowed j, p = softmax(s), out = sum_j p_j v_j.
// Backward: dp_j = dout.v_j, ds_j = p_j (dp_j - sum_i p_i dp_i), dq = scale * sum_j ds_j k_j,
// dk_j += scale * ds_j q, dv_j += p_j dout (dk/dv summed over the query heads of each kv head).
#include <cmath>
#include <limits>
#include <vector>

#include "attention/cpu_attention.h"

namespace sprig::cpu {

namespace {

// The dense masks of a batch, one per mask row.
std::vector<Tensor> dense_masks(const BatchMask& mask) {
  std::vector<Tensor> rows;
  for (int64_t r = 0; r < mask.num_rows(); ++r) rows.push_back(mask.row(r).dense());
  return rows;
}

template <class T>
T dot(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// Shapes, data and dense masks of one problem; qi / ki index the head vectors of q / k and v.
template <class T>
struct Problem {
  int64_t batch, tq, tk, hq, hkv, d;
  T scale;
  const T *q, *k, *v;
  std::vector<Tensor> masks;  // one per mask row

  Problem(const Tensor& q_, const Tensor& k_, const Tensor& v_, const BatchMask& m, double s)
      : batch(q_.size(0)), tq(q_.size(1)), tk(k_.size(1)), hq(q_.size(2)), hkv(k_.size(2)),
        d(q_.size(3)), scale(static_cast<T>(s)), q(q_.data<T>()), k(k_.data<T>()),
        v(v_.data<T>()), masks(dense_masks(m)) {}

  int64_t qi(int64_t b, int64_t t, int64_t h) const { return ((b * tq + t) * hq + h) * d; }
  int64_t ki(int64_t b, int64_t t, int64_t h) const { return ((b * tk + t) * hkv + h) * d; }
  const bool* allowed(int64_t b, int64_t t) const {
    return masks[masks.size() == 1 ? 0 : b].template data<bool>() + t * tk;
  }

  // Softmax probabilities of query row t of head h into p (0 where masked); false when the row
  // is fully masked. lse receives the row's log-sum-exp.
  bool probs(int64_t b, int64_t h, int64_t t, std::vector<T>& p, T& lse) const {
    const bool* ok = allowed(b, t);
    const int64_t kvh = h / (hq / hkv);
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < tk; ++j)
      if (ok[j]) mx = std::max(mx, p[j] = scale * dot(q + qi(b, t, h), k + ki(b, j, kvh), d));
    lse = mx;
    if (mx == -std::numeric_limits<T>::infinity()) return false;
    T sum = 0;
    for (int64_t j = 0; j < tk; ++j) sum += p[j] = ok[j] ? std::exp(p[j] - mx) : T(0);
    for (int64_t j = 0; j < tk; ++j) p[j] /= sum;
    lse = mx + std::log(sum);
    return true;
  }
};

template <class T>
void forward(const Tensor& q, const Tensor& k, const Tensor& v, const BatchMask& mask,
             double scale, const Tensor& out, const Tensor& lse) {
  const Problem<T> pr(q, k, v, mask, scale);
  T* o = out.data<T>();
  T* l = lse.data<T>();
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < pr.batch; ++b)
    for (int64_t h = 0; h < pr.hq; ++h) {
      std::vector<T> p(pr.tk);
      const int64_t kvh = h / (pr.hq / pr.hkv);
      for (int64_t t = 0; t < pr.tq; ++t) {
        T* row = o + pr.qi(b, t, h);
        std::fill(row, row + pr.d, T(0));
        const bool any = pr.probs(b, h, t, p, l[(b * pr.hq + h) * pr.tq + t]);
        for (int64_t j = 0; any && j < pr.tk; ++j)
          for (int64_t c = 0; c < pr.d; ++c) row[c] += p[j] * pr.v[pr.ki(b, j, kvh) + c];
      }
    }
}

template <class T>
void backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
              const BatchMask& mask, double scale, const Tensor& dq, const Tensor& dk,
              const Tensor& dv) {
  const Problem<T> pr(q, k, v, mask, scale);
  const T* go = dout.data<T>();
  T *gq = dq.data<T>(), *gk = dk.data<T>(), *gv = dv.data<T>();
  std::fill(gk, gk + dk.numel(), T(0));
  std::fill(gv, gv + dv.numel(), T(0));
  const int64_t group = pr.hq / pr.hkv;
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < pr.batch; ++b)
    for (int64_t kvh = 0; kvh < pr.hkv; ++kvh) {  // owns dk, dv of this kv head
      std::vector<T> p(pr.tk), ds(pr.tk);
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h)
        for (int64_t t = 0; t < pr.tq; ++t) {
          T lse, delta = 0;
          T* dq_row = gq + pr.qi(b, t, h);
          std::fill(dq_row, dq_row + pr.d, T(0));
          if (!pr.probs(b, h, t, p, lse)) continue;
          const T* g = go + pr.qi(b, t, h);
          for (int64_t j = 0; j < pr.tk; ++j) {
            ds[j] = p[j] == T(0) ? T(0) : dot(g, pr.v + pr.ki(b, j, kvh), pr.d);
            delta += p[j] * ds[j];
          }
          for (int64_t j = 0; j < pr.tk; ++j) {
            if (p[j] == T(0)) continue;
            const T s = p[j] * (ds[j] - delta) * pr.scale;
            const T* q_row = pr.q + pr.qi(b, t, h);
            const int64_t kj = pr.ki(b, j, kvh);
            for (int64_t c = 0; c < pr.d; ++c) {
              dq_row[c] += s * pr.k[kj + c];
              gk[kj + c] += s * q_row[c];
              gv[kj + c] += p[j] * g[c];
            }
          }
        }
    }
}

}  // namespace

void attention_reference_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const BatchMask& mask, double scale, const Tensor& out,
                                 const Tensor& lse) {
  if (q.dtype() == DType::f64) forward<double>(q, k, v, mask, scale, out, lse);
  else forward<float>(q, k, v, mask, scale, out, lse);
}

void attention_reference_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& dout, const BatchMask& mask, double scale,
                                  const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  if (q.dtype() == DType::f64) backward<double>(q, k, v, dout, mask, scale, dq, dk, dv);
  else backward<float>(q, k, v, dout, mask, scale, dq, dk, dv);
}

}  // namespace sprig::cpu
