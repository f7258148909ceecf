// Dense reference attention on CPU: per (batch, head), the whole [Tq, Tk] score matrix is
// materialised with the dense mask and the textbook formulas run as Eigen GEMMs in the tensors'
// own precision (f64: the test reference; f32: the naive same-precision implementation).
// Forward: S = scale * Q K^T (-inf where masked), P = softmax(S) by rows, out = P V,
// lse = log(rowsum(exp S)). Backward: dP = dO V^T, dS = P * (dP - rowsum(P * dP)),
// dQ = scale * dS K, dK += scale * dS^T Q, dV += P^T dO (dK/dV summed over the query heads of
// each kv head).
// GCC 12 reports false -Wmaybe-uninitialized warnings inside its AVX-512 intrinsics headers when
// Eigen's GEMM inlines them; the pragma covers those headers, included first by Eigen here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include <cmath>
#include <limits>
#include <vector>

#include "attention/cpu_attention.h"

namespace sprig::cpu {

namespace {

template <class T> using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T> using Rows = Eigen::Map<Matrix<T>, 0, Eigen::OuterStride<>>;

// One problem: shapes, data and the dense masks (one per mask row).
template <class T> struct Problem {
  int64_t batch, tq, tk, hq, hkv, d;
  T scale;
  std::vector<Tensor> masks;

  Problem(const Tensor& q, const Tensor& k, const BatchMask& mask, double s)
      : batch(q.size(0)),
        tq(q.size(1)),
        tk(k.size(1)),
        hq(q.size(2)),
        hkv(k.size(2)),
        d(q.size(3)),
        scale(static_cast<T>(s)) {
    for (int64_t r = 0; r < mask.num_rows(); ++r) masks.push_back(mask.row(r).dense());
  }

  // Head h of batch row b of a contiguous [B, T, H, D] tensor as a T x D matrix.
  Rows<T> head(const Tensor& x, int64_t b, int64_t h) const {
    const int64_t t = x.size(1), heads = x.size(2);
    return Rows<T>(x.data<T>() + (b * t * heads + h) * d, t, d, Eigen::OuterStride<>(heads * d));
  }

  // P = softmax(scale * Q K^T) over the allowed keys (0 elsewhere; all 0 on fully masked rows)
  // for head h of batch row b; lse per row (-inf on fully masked rows).
  Matrix<T> probs(const Tensor& q, const Tensor& k, int64_t b, int64_t h,
                  std::vector<T>& lse) const {
    constexpr T kInf = std::numeric_limits<T>::infinity();
    Matrix<T> p = (head(q, b, h) * head(k, b, h / (hq / hkv)).transpose()) * scale;
    const bool* allowed = masks[masks.size() == 1 ? 0 : b].template data<bool>();
    lse.assign(tq, -kInf);
    for (int64_t i = 0; i < tq; ++i) {
      T mx = -kInf;
      for (int64_t j = 0; j < tk; ++j)
        if (allowed[i * tk + j]) mx = std::max(mx, p(i, j));
      T sum = 0;
      for (int64_t j = 0; j < tk; ++j)
        sum += p(i, j) = allowed[i * tk + j] ? std::exp(p(i, j) - mx) : T(0);
      if (sum == 0) continue;  // fully masked row
      p.row(i) /= sum;
      lse[i] = mx + std::log(sum);
    }
    return p;
  }
};

template <class T>
void forward(const Tensor& q, const Tensor& k, const Tensor& v, const BatchMask& mask, double scale,
             const Tensor& out, const Tensor& lse) {
  const Problem<T> pr(q, k, mask, scale);
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < pr.batch; ++b)
    for (int64_t h = 0; h < pr.hq; ++h) {
      std::vector<T> row_lse;
      const Matrix<T> p = pr.probs(q, k, b, h, row_lse);
      pr.head(out, b, h).noalias() = p * pr.head(v, b, h / (pr.hq / pr.hkv));
      std::copy(row_lse.begin(), row_lse.end(), lse.data<T>() + (b * pr.hq + h) * pr.tq);
    }
}

template <class T>
void backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
              const BatchMask& mask, double scale, const Tensor& dq, const Tensor& dk,
              const Tensor& dv) {
  const Problem<T> pr(q, k, mask, scale);
  const int64_t group = pr.hq / pr.hkv;
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < pr.batch; ++b)
    for (int64_t kvh = 0; kvh < pr.hkv; ++kvh) {  // owns dk, dv of this kv head
      Rows<T> dk_h = pr.head(dk, b, kvh), dv_h = pr.head(dv, b, kvh);
      dk_h.setZero();
      dv_h.setZero();
      for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
        std::vector<T> row_lse;
        const Matrix<T> p = pr.probs(q, k, b, h, row_lse);
        const Matrix<T> dp = pr.head(dout, b, h) * pr.head(v, b, kvh).transpose();
        const Eigen::Matrix<T, Eigen::Dynamic, 1> delta = p.cwiseProduct(dp).rowwise().sum();
        const Matrix<T> ds = p.cwiseProduct(dp - delta.replicate(1, pr.tk));
        pr.head(dq, b, h).noalias() = pr.scale * ds * pr.head(k, b, kvh);
        dk_h.noalias() += pr.scale * ds.transpose() * pr.head(q, b, h);
        dv_h.noalias() += p.transpose() * pr.head(dout, b, h);
      }
    }
}

}  // namespace

void attention_reference_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const BatchMask& mask, double scale, const Tensor& out,
                                 const Tensor& lse) {
  if (q.dtype() == DType::f64)
    forward<double>(q, k, v, mask, scale, out, lse);
  else
    forward<float>(q, k, v, mask, scale, out, lse);
}

void attention_reference_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& dout, const BatchMask& mask, double scale,
                                  const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  if (q.dtype() == DType::f64)
    backward<double>(q, k, v, dout, mask, scale, dq, dk, dv);
  else
    backward<float>(q, k, v, dout, mask, scale, dq, dk, dv);
}

}  // namespace sprig::cpu
