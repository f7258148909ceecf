// The dense host reference of the flash-attention kernels, the masks and inputs their tests share
// (tests/parity/attention_cases.h runs them: tests/attention/flash_gpu.cpp and cudnn_gpu.cpp on a
// GPU, tests/kernel_emu/flash_emu.cpp on the emulated device): attention in f64, and the naive
// implementation in the inputs' precision whose error FlashAttention's rule bounds the kernels'
// by.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "attention/attention.h"
#include "attention/cuda/device_tile_map.h"
#include "tests/test_util.h"

namespace sprig::flash_test {

using testing::max_abs_diff;

struct Problem {
  BatchMask mask;
  int64_t batch, q_heads, kv_heads, head_dim;
  DType dtype = DType::bf16;

  int64_t q_len() const { return mask.q_len(); }
  int64_t k_len() const { return mask.k_len(); }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(head_dim)); }
};

struct Inputs {
  Tensor q, k, v, dout;  // [B, T, H, D], on the host or on the GPU
};

// out, lse, dq, dk, dv as host f64 tensors.
struct Outputs {
  Tensor out, lse, dq, dk, dv;
};

// Attention of every (batch row, head) with the dense mask. Acc = double with round = identity is
// the reference. Acc = float with round = the 16-bit rounding is the naive implementation in the
// inputs' precision, as PyTorch runs attention on bf16 tensors: each op accumulates in fp32 and
// rounds its result (scores, P, out, dP, dS and the gradients) to the 16-bit type.
template <class Acc, class Round>
Outputs dense_attention(const Problem& p, const Inputs& host, Round round) {
  const int64_t B = p.batch, Tq = p.q_len(), Tk = p.k_len(), Hq = p.q_heads, D = p.head_dim;
  const int64_t G = p.q_heads / p.kv_heads;
  const std::vector<double> q = host.q.to_vector<double>(), k = host.k.to_vector<double>(),
                            v = host.v.to_vector<double>(), dout = host.dout.to_vector<double>();
  std::vector<double> out(q.size()), lse(B * Hq * Tq), dq(q.size()), dk(k.size()), dv(k.size());
  std::vector<Acc> prob(Tq * Tk), ds(Tq * Tk), dk_acc(Tk * D), dv_acc(Tk * D);
  const Acc scale = static_cast<Acc>(p.scale());
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int32_t> allowed = p.mask.row(b).dense().to_vector<int32_t>();
    for (int64_t kvh = 0; kvh < p.kv_heads; ++kvh) {
      std::fill(dk_acc.begin(), dk_acc.end(), Acc(0));
      std::fill(dv_acc.begin(), dv_acc.end(), Acc(0));
      for (int64_t h = kvh * G; h < (kvh + 1) * G; ++h) {
        const auto qi = [&](int64_t i) { return ((b * Tq + i) * Hq + h) * D; };
        const auto kj = [&](int64_t j) { return ((b * Tk + j) * p.kv_heads + kvh) * D; };
        const auto dot = [&](const std::vector<double>& x, int64_t xo, const std::vector<double>& y,
                             int64_t yo) {
          Acc s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += static_cast<Acc>(x[xo + d]) * static_cast<Acc>(y[yo + d]);
          return s;
        };
#pragma omp parallel for schedule(dynamic, 8)
        for (int64_t i = 0; i < Tq; ++i) {  // forward, dP, dS and dq of query row i
          Acc* pr = &prob[i * Tk];
          Acc* dsr = &ds[i * Tk];
          Acc mx = -INFINITY;
          for (int64_t j = 0; j < Tk; ++j) {
            pr[j] = allowed[i * Tk + j] ? round(scale * dot(q, qi(i), k, kj(j))) : -INFINITY;
            mx = std::max(mx, pr[j]);
          }
          Acc l = 0;
          for (int64_t j = 0; j < Tk; ++j) l += mx == -INFINITY ? Acc(0) : std::exp(pr[j] - mx);
          const Acc row_lse = l > 0 ? mx + std::log(l) : -INFINITY;
          lse[(b * Hq + h) * Tq + i] = row_lse;
          for (int64_t j = 0; j < Tk; ++j) pr[j] = l > 0 ? round(std::exp(pr[j] - row_lse)) : 0;
          std::vector<Acc> o(D, Acc(0)), g(D, Acc(0));
          for (int64_t j = 0; j < Tk; ++j)
            if (pr[j] != 0)
              for (int64_t d = 0; d < D; ++d) o[d] += pr[j] * static_cast<Acc>(v[kj(j) + d]);
          Acc delta = 0;
          for (int64_t d = 0; d < D; ++d) {
            out[qi(i) + d] = round(o[d]);
            delta += static_cast<Acc>(dout[qi(i) + d]) * round(o[d]);
          }
          for (int64_t j = 0; j < Tk; ++j) {
            dsr[j] = pr[j] == 0 ? 0 : round(pr[j] * (round(dot(dout, qi(i), v, kj(j))) - delta));
            if (dsr[j] != 0)
              for (int64_t d = 0; d < D; ++d) g[d] += dsr[j] * static_cast<Acc>(k[kj(j) + d]);
          }
          for (int64_t d = 0; d < D; ++d) dq[qi(i) + d] = round(scale * g[d]);
        }
#pragma omp parallel for schedule(dynamic, 8)
        for (int64_t j = 0; j < Tk; ++j)  // dK, dV of key j, summed over the group's heads
          for (int64_t i = 0; i < Tq; ++i) {
            if (prob[i * Tk + j] == 0) continue;
            for (int64_t d = 0; d < D; ++d) {
              dk_acc[j * D + d] += scale * ds[i * Tk + j] * static_cast<Acc>(q[qi(i) + d]);
              dv_acc[j * D + d] += prob[i * Tk + j] * static_cast<Acc>(dout[qi(i) + d]);
            }
          }
      }
      for (int64_t j = 0; j < Tk; ++j)
        for (int64_t d = 0; d < D; ++d) {
          dk[((b * Tk + j) * p.kv_heads + kvh) * D + d] = round(dk_acc[j * D + d]);
          dv[((b * Tk + j) * p.kv_heads + kvh) * D + d] = round(dv_acc[j * D + d]);
        }
    }
  }
  const auto tensor = [](const std::vector<double>& x, const Tensor& like) {
    return Tensor::from_vector(x, like.shape());
  };
  return {tensor(out, host.q), Tensor::from_vector(lse, {B, Hq, Tq}), tensor(dq, host.q),
          tensor(dk, host.k), tensor(dv, host.k)};
}

// ---- masks ------------------------------------------------------------------------------------

enum class Kind { causal, documents, prefix_tree, dflash };

inline BatchMask make_mask(Kind kind, int64_t t, int64_t batch) {
  if (kind == Kind::causal) return BatchMask(causal_mask(t));
  if (kind == Kind::documents) {  // one split per batch row, with a window on the second
    std::vector<Mask> rows = {document_mask({t - t / 3, t / 3})};
    if (batch > 1) rows.push_back(document_mask({t / 4, t / 4, t - t / 2}, t, 5));
    return BatchMask(rows);
  }
  if (kind == Kind::prefix_tree) {  // root, two children, a grandchild under the first
    if (t < 4) return BatchMask(prefix_tree_mask({t}, {{0}}));
    return BatchMask(prefix_tree_mask({t / 4, t / 4, t / 4, t - 3 * (t / 4)}, {{0, 1, 3}, {0, 2}}));
  }
  DFlashMaskSpec s;  // blocks of 4 slots, sorted anchors, the last quarter dropped
  s.ctx_len = t;
  s.block_size = 4;
  const int64_t blocks = std::max<int64_t>(1, t / 8), kept = blocks - blocks / 4;
  for (int64_t j = 0; j < blocks; ++j) {
    s.anchors.push_back(j < kept ? j * std::max<int64_t>(t - 4, 0) / blocks : 0);
    s.keep.push_back(j < kept);
  }
  s.causal = blocks % 3 == 0;
  if (t >= 97) s.seq_lens = {t / 2, t - t / 2};
  if (t >= 1025) s.sliding_window = 300;
  return BatchMask(dflash_mask(s));
}

// The tile maps of both passes for p's mask, each of its pass's tile shape, on `device`.
struct PassMaps {
  cuda::DeviceTileMap forward, backward;
};
inline PassMaps pass_maps(const Problem& p, Device device) {
  const RowIntervals intervals = row_intervals(p.mask);
  const auto map = [&](cuda::FlashPass pass) {
    const cuda::TileShape s = cuda::flash_tile_shape(pass, p.head_dim);
    return cuda::upload_tile_map(compile_tile_map(intervals, s.block_m, s.block_n), device);
  };
  return {map(cuda::FlashPass::forward), map(cuda::FlashPass::backward)};
}

inline Outputs host_outputs(const Tensor& out, const Tensor& lse, const Tensor& dq,
                            const Tensor& dk, const Tensor& dv) {
  const auto host = [](const Tensor& t) { return t.to(Device::cpu()).to(DType::f64); };
  return {host(out), host(lse), host(dq), host(dk), host(dv)};
}

// A backend's attention on host inputs: out, lse, dq, dk, dv as host f64 tensors, dQ by atomics
// or by the deterministic kernel.
using FlashRunner =
    std::function<Outputs(const Problem& p, const Inputs& host, bool deterministic)>;

inline Inputs random_inputs(const Problem& p, uint64_t seed) {
  const auto input = [&](int64_t t, int64_t heads, uint64_t s) {
    return testing::rand_normal({p.batch, t, heads, p.head_dim}, s).to(p.dtype);
  };
  return {input(p.q_len(), p.q_heads, seed), input(p.k_len(), p.kv_heads, seed + 1),
          input(p.k_len(), p.kv_heads, seed + 2), input(p.q_len(), p.q_heads, seed + 3)};
}

}  // namespace sprig::flash_test
