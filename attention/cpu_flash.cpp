// Tiled flash attention on CPU (fp32, Eigen GEMMs on tiles, OpenMP), driven by the tile map, and
// the CPU twins of the CUDA attention entry points (cpu_attention.h).
//
// Forward, per (batch, head, query tile): for each listed key tile, S = scale * Q K^T, masked to
// -inf by the keep bits on partial tiles, folded into a running row max m, row sum l and output
// accumulator (online softmax); at the end out = acc / l and lse = m + log l (0 and -inf for rows
// that saw no allowed key).
// Masked pairs get exactly 0 probability by setting them to 0 after the exponential: Eigen's
// vectorised exp clamps its argument, so exp(-inf) is 2.9e-39 rather than 0 without AVX-512, and
// a fully masked row's P, normalised in backward pass 1, would become uniform over masked keys.
// Backward, three deterministic passes over P = exp(S - lse) * norm and dP = dO V^T:
//   1. per query tile: norm = 1 / rowsum(P) and delta = rowsum(P * dP) / rowsum(P);
//   2. per query tile: dS = P * (dP - delta), dQ = scale * dS K;
//   3. per key tile and the G query heads of its kv head: dV = P^T dO, dK = scale * dS^T Q.
// In exact arithmetic norm = 1 and delta = rowsum(dO * O) (FlashAttention's preprocessing). In
// fp32, delta from the forward's rounded O and P from the rounded lse make the gradients several
// times less accurate than a naive dense implementation's; pass 1 makes every row of P sum to 1
// and every row of dS sum to 0 as the naive softmax backward does, for ~30% more work.
// GCC 12 reports false -Wmaybe-uninitialized warnings inside its AVX-512 intrinsics headers when
// Eigen's GEMM inlines them; the pragma covers those headers, included first by Eigen here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cmath>
#include <limits>

#include "attention/cpu_attention.h"

namespace sprig::cpu {

namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Rows = Eigen::Map<Matrix, 0, Eigen::OuterStride<>>;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int32_t kPartial = static_cast<int32_t>(TileKind::partial);

// A contiguous [B, T, H, D] f32 tensor, seen per head as T x D matrices with row stride H * D.
struct Heads {
  float* data;
  int64_t T, H, D;
  explicit Heads(const Tensor& x)
      : data(x.data<float>()), T(x.size(1)), H(x.size(2)), D(x.size(3)) {}
  Rows rows(int64_t b, int64_t h, int64_t t0, int64_t n) const {
    return Rows(data + ((b * T + t0) * H + h) * D, n, D, Eigen::OuterStride<>(H * D));
  }
};

// A contiguous [B, H, T] f32 tensor of per-row statistics (lse, delta).
struct RowStats {
  float* data;
  int64_t H, T;
  explicit RowStats(const Tensor& x) : data(x.data<float>()), H(x.size(1)), T(x.size(2)) {}
  float* at(int64_t b, int64_t h, int64_t t) const { return data + (b * H + h) * T + t; }
};

// Sets the entries of masked (query, key) pairs of a partial tile to `value`.
void apply_keep_bits(const TileMap& map, int32_t mask_idx, float value, Matrix& s) {
  for (int32_t i = 0; i < s.rows(); ++i)
    for (int32_t j = 0; j < s.cols(); ++j)
      if (!map.allowed_in_partial(mask_idx, i, j)) s(i, j) = value;
}

// Runs body(b, h, tile, line) for every (batch, head, tile) of one tile axis, in parallel, heads
// of all batches interleaved inside the map's LPT order so the heaviest tiles start first; `line`
// indexes the tile's entries in the TileList of that axis.
template <class Body>
void for_each_tile(int64_t batch, int64_t heads, const TileMap& map,
                   const std::vector<int32_t>& order, int32_t tiles_per_row, Body body) {
  const int64_t lanes = batch * heads, tasks = lanes * tiles_per_row;
#pragma omp parallel for schedule(dynamic)
  for (int64_t task = 0; task < tasks; ++task) {
    const int64_t b = task % lanes / heads, h = task % heads, rank = task / lanes;
    const int64_t first = (map.num_rows == 1 ? 0 : b) * tiles_per_row;
    const int32_t tile = order[first + rank];
    body(b, h, tile, first + tile);
  }
}

// Rows (or keys) of the tile starting at `start`: `block`, or fewer at the end of `length`.
int64_t tile_extent(int64_t start, int32_t block, int64_t length) {
  return std::min<int64_t>(block, length - start);
}

// The inputs of the backward passes.
struct Backward {
  Heads q, k, v, dout;
  RowStats lse, delta, norm;
  const TileMap& map;
  float scale;
  int64_t group;  // query heads per kv head

  // P = exp(S - lse) * norm (exactly 0 where masked and on fully masked rows, lse = -inf) and
  // dP = dO V^T of the tile pair (queries [q0, q0 + m), keys [k0, k0 + n)) of head h.
  void probs(int64_t b, int64_t h, int64_t q0, int64_t m, int64_t k0, int64_t n, int32_t entry_kind,
             int32_t mask_idx, Matrix& p, Matrix& dp) const {
    const int64_t kvh = h / group;
    p.noalias() = q.rows(b, h, q0, m) * k.rows(b, kvh, k0, n).transpose();
    p *= scale;
    for (int64_t i = 0; i < m; ++i) {
      const float row_lse = *lse.at(b, h, q0 + i);
      if (row_lse == -kInf)
        p.row(i).setZero();
      else
        p.row(i) = (p.row(i).array() - row_lse).exp() * *norm.at(b, h, q0 + i);
    }
    if (entry_kind == kPartial) apply_keep_bits(map, mask_idx, 0.0f, p);
    dp.noalias() = dout.rows(b, h, q0, m) * v.rows(b, kvh, k0, n).transpose();
  }
  // dS = P * (dP - delta), in place of dP.
  void dscores(int64_t b, int64_t h, int64_t q0, const Matrix& p, Matrix& dp) const {
    for (int64_t i = 0; i < p.rows(); ++i)
      dp.row(i) = p.row(i).array() * (dp.row(i).array() - *delta.at(b, h, q0 + i));
  }
};

}  // namespace

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const TileMap& map,
                             float scale, const Tensor& out, const Tensor& lse) {
  const Heads qh(q), kh(k), vh(v), oh(out);
  const RowStats lse_rows(lse);
  const int64_t group = qh.H / kh.H, d = qh.D;
  const TileList& list = map.by_query;
  auto query_tile = [&](int64_t b, int64_t h, int32_t t, int64_t line) {
    const int64_t q0 = static_cast<int64_t>(t) * map.block_m;
    const int64_t m = tile_extent(q0, map.block_m, qh.T), kvh = h / group;
    const Matrix qs = qh.rows(b, h, q0, m) * scale;
    Matrix acc = Matrix::Zero(m, d), s;
    Eigen::VectorXf row_max = Eigen::VectorXf::Constant(m, -kInf);
    Eigen::VectorXf row_sum = Eigen::VectorXf::Zero(m);
    for (int32_t e = list.ptr[line]; e < list.ptr[line + 1]; ++e) {
      const int64_t k0 = list.start[e], n = tile_extent(k0, map.block_n, kh.T);
      s.noalias() = qs * kh.rows(b, kvh, k0, n).transpose();
      const bool partial = list.kind[e] == kPartial;
      if (partial) apply_keep_bits(map, list.mask_idx[e], -kInf, s);
      for (int64_t i = 0; i < m; ++i) {
        const float new_max = std::max(row_max[i], s.row(i).maxCoeff());
        if (new_max == -kInf) {  // no allowed key in this row yet
          s.row(i).setZero();
          continue;
        }
        s.row(i) = (s.row(i).array() - new_max).exp();
        const float alpha = std::exp(row_max[i] - new_max);  // scalar exp: exp(-inf) = 0
        acc.row(i) *= alpha;
        row_sum[i] *= alpha;
        row_max[i] = new_max;
      }
      if (partial) apply_keep_bits(map, list.mask_idx[e], 0.0f, s);
      row_sum += s.rowwise().sum();
      acc.noalias() += s * vh.rows(b, kvh, k0, n);
    }
    Rows o = oh.rows(b, h, q0, m);
    for (int64_t i = 0; i < m; ++i) {
      if (row_sum[i] == 0.0f) {  // fully masked row
        o.row(i).setZero();
        *lse_rows.at(b, h, q0 + i) = -kInf;
      } else {
        o.row(i) = acc.row(i) / row_sum[i];
        *lse_rows.at(b, h, q0 + i) = row_max[i] + std::log(row_sum[i]);
      }
    }
  };
  for_each_tile(q.size(0), qh.H, map, map.q_order, map.num_q_tiles, query_tile);
}

void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse,
                              const Tensor& dout, const TileMap& map, float scale, const Tensor& dq,
                              const Tensor& dk, const Tensor& dv) {
  const int64_t batch = q.size(0), tq = q.size(1), tk = k.size(1), hq = q.size(2), hkv = k.size(2),
                d = q.size(3);
  // norm starts at 1, so pass 1 sees the plain exp(S - lse); fully masked rows keep delta 0.
  const Tensor delta = Tensor::zeros({batch, hq, tq}), norm = Tensor::ones({batch, hq, tq});
  const Backward bw{Heads(q),        Heads(k),       Heads(v), Heads(dout), RowStats(lse),
                    RowStats(delta), RowStats(norm), map,      scale,       hq / hkv};
  const Heads dqh(dq), dkh(dk), dvh(dv);
  const TileList &by_query = map.by_query, &by_key = map.by_key;

  auto normalise = [&](int64_t b, int64_t h, int32_t t, int64_t line) {  // pass 1
    const int64_t q0 = static_cast<int64_t>(t) * map.block_m, m = tile_extent(q0, map.block_m, tq);
    Eigen::VectorXd sum_p = Eigen::VectorXd::Zero(m), sum_p_dp = Eigen::VectorXd::Zero(m);
    Matrix p, dp;
    for (int32_t e = by_query.ptr[line]; e < by_query.ptr[line + 1]; ++e) {
      const int64_t k0 = by_query.start[e], n = tile_extent(k0, map.block_n, tk);
      bw.probs(b, h, q0, m, k0, n, by_query.kind[e], by_query.mask_idx[e], p, dp);
      sum_p += p.rowwise().sum().cast<double>();
      sum_p_dp += p.cwiseProduct(dp).rowwise().sum().cast<double>();
    }
    for (int64_t i = 0; i < m; ++i) {
      if (*bw.lse.at(b, h, q0 + i) == -kInf) continue;  // fully masked row: P = 0, so dS = 0
      *bw.delta.at(b, h, q0 + i) = static_cast<float>(sum_p_dp[i] / sum_p[i]);
      *bw.norm.at(b, h, q0 + i) = static_cast<float>(1.0 / sum_p[i]);
    }
  };
  auto query_grads = [&](int64_t b, int64_t h, int32_t t, int64_t line) {  // pass 2
    const int64_t q0 = static_cast<int64_t>(t) * map.block_m, m = tile_extent(q0, map.block_m, tq);
    Matrix acc = Matrix::Zero(m, d), p, ds;
    for (int32_t e = by_query.ptr[line]; e < by_query.ptr[line + 1]; ++e) {
      const int64_t k0 = by_query.start[e], n = tile_extent(k0, map.block_n, tk);
      bw.probs(b, h, q0, m, k0, n, by_query.kind[e], by_query.mask_idx[e], p, ds);
      bw.dscores(b, h, q0, p, ds);
      acc.noalias() += ds * bw.k.rows(b, h / bw.group, k0, n);
    }
    dqh.rows(b, h, q0, m) = acc * scale;
  };
  auto key_grads = [&](int64_t b, int64_t kvh, int32_t j, int64_t line) {  // pass 3
    const int64_t k0 = static_cast<int64_t>(j) * map.block_n, n = tile_extent(k0, map.block_n, tk);
    Matrix dk_acc = Matrix::Zero(n, d), dv_acc = Matrix::Zero(n, d), p, ds;
    for (int32_t e = by_key.ptr[line]; e < by_key.ptr[line + 1]; ++e) {
      const int64_t q0 = by_key.start[e], m = tile_extent(q0, map.block_m, tq);
      for (int64_t h = kvh * bw.group; h < (kvh + 1) * bw.group; ++h) {
        bw.probs(b, h, q0, m, k0, n, by_key.kind[e], by_key.mask_idx[e], p, ds);
        bw.dscores(b, h, q0, p, ds);
        dv_acc.noalias() += p.transpose() * bw.dout.rows(b, h, q0, m);
        dk_acc.noalias() += ds.transpose() * bw.q.rows(b, h, q0, m);
      }
    }
    dkh.rows(b, kvh, k0, n) = dk_acc * scale;
    dvh.rows(b, kvh, k0, n) = dv_acc;
  };
  for_each_tile(batch, hq, map, map.q_order, map.num_q_tiles, normalise);
  for_each_tile(batch, hq, map, map.q_order, map.num_q_tiles, query_grads);
  for_each_tile(batch, hkv, map, map.k_order, map.num_k_tiles, key_grads);
}

void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                       double scale, const Tensor& out, const Tensor& lse) {
  if (q.dtype() == DType::f64)
    return attention_reference_forward(q, k, v, mask.mask(), scale, out, lse);
  flash_attention_forward(q, k, v, mask.tile_map(kAttentionBlockM, kAttentionBlockN),
                          static_cast<float>(scale), out, lse);
}

void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor&,
                        const Tensor& lse, const Tensor& dout, const AttentionMask& mask,
                        double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  if (q.dtype() == DType::f64)
    return attention_reference_backward(q, k, v, dout, mask.mask(), scale, dq, dk, dv);
  flash_attention_backward(q, k, v, lse, dout, mask.tile_map(kAttentionBlockM, kAttentionBlockN),
                           static_cast<float>(scale), dq, dk, dv);
}

}  // namespace sprig::cpu
