// CUDA flash-attention backward (docs/kernels.md §4.8), driven by the tile map of the backward tile
// shape. Backward rule: dq, dk, dv are activation gradients, written with `=`.
//
// 1. preprocess: delta = rowsum(dout * out) in fp32 and lse_log2 = lse * log2(e), with +inf
//    where lse = -inf so that fully masked rows get P = 2^(s - inf) = 0 (and, with atomics, a
//    memset zeroes the fp32 dQ accumulator).
// 2. dK/dV: one CTA per (key tile, kv head, batch row) over the by_key list, 8 warps. It loops
//    over the G query heads of its kv head and the query tiles of each, so dK and dV stay in
//    registers without atomics, and K and V are loaded once; Q, dO, lse_log2 and delta are
//    double-buffered, the next item loading while the current one computes. Per item, phase 1
//    (warps 4 keys x 2 queries): S^T = K Q^T, P^T = 2^(S^T scale log2(e) - lse_log2),
//    dP^T = V dO^T, dS^T = P^T (dP^T - delta), P^T and dS^T stored to shared memory; phase 2
//    (warps 4 keys x 2 halves of D): dV += P^T dO, dK += dS^T Q, and with atomics dQ += dS K added
//    to an fp32 accumulator with vector reductions (red.global.add.v2.f32); 3. a convert kernel
//    scales it and casts it to dq.
// Deterministic mode: 2. skips dQ, and a query-tile-major kernel over the by_query list computes
//    S, P, dP and dS again per tile and dQ += dS K in registers, then stores dq.
//
// Shapes: q, out, dout, dq [B, Tq, Hq, D]; k, v, dk, dv [B, Tk, Hkv, D]; lse, delta, lse_log2
// [B, Hq, Tq]; the dQ accumulator [B, Tq, Hq, D] f32.
#include "attention/cuda/flash_common.cuh"

namespace sprig::cuda {

namespace {

using namespace flash;

struct BwdParams {
  const void *q, *k, *v, *dout;
  const float *lse_log2, *delta;
  float* dq_accum;  // nullptr in deterministic mode
  void *dq, *dk, *dv;
  TileListView by_key, by_query;
  int batch, q_len, k_len, q_heads, kv_heads;
  float scale, scale_log2;  // scale, scale * log2(e)
};

// ---- 1. preprocess ----------------------------------------------------------------------------

// One warp per (b, t, h) row of out, grid-stride.
template <class T>
__global__ void flash_bwd_preprocess_kernel(const T* out, const T* dout, const float* lse,
                                            float* delta, float* lse_log2, int batch, int q_len,
                                            int heads, int head_dim) {
  const int64_t rows = int64_t(batch) * q_len * heads, warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t row = int64_t(blockIdx.x) * blockDim.x / 32 + warp_id(); row < rows; row += warps) {
    float sum = 0.f;
    for (int c = lane_id(); c < head_dim; c += 32)
      sum += to_float(out[row * head_dim + c]) * to_float(dout[row * head_dim + c]);
    sum = warp_sum(sum);
    if (lane_id() == 0) {
      const int64_t bt = row / heads, b = bt / q_len, t = bt % q_len;
      const int64_t i = (b * heads + row % heads) * q_len + t;
      delta[i] = sum;
      lse_log2[i] = lse[i] == -INFINITY ? INFINITY : lse[i] * kLog2e;
    }
  }
}

// ---- 2. dK/dV (and dQ with atomics), key-tile-major -------------------------------------------

// The 8 warps tile each GEMM in two dimensions, so that every fragment read from shared memory
// feeds several MMAs: S^T and dP^T (keys x queries) as 4 x 2 warps of 32 keys x kPassQ / 2 queries
// per pass; dK and dV (keys x D) as 4 x 2 warps of 32 keys x D / 2 columns; dQ (queries x D) as
// kDqRowTiles x kDqSplit warps of 16 rows x 64 columns. The tilings differ, so P^T and dS^T go
// through shared memory between the two phases of an item.
template <class T, int D> struct DkdvKernel {
  static constexpr detail::FlashConfig kConfig = detail::flash_config(FlashPass::backward, D);
  static constexpr int kBM = kConfig.block_m, kBN = kConfig.block_n;
  static constexpr int kThreads = 32 * kConfig.warps;
  static constexpr int kKeyWarps = 4, kWarpKeys = kBN / kKeyWarps;  // 32 keys: 2 m16 tiles
  static constexpr int kOtherWarps = kConfig.warps / kKeyWarps;     // along queries, or along D
  static constexpr int kWarpQ = 32, kPassQ = kWarpQ * kOtherWarps;  // queries per warp and pass
  static constexpr int kSNT = kWarpQ / 8;                           // n8 tiles of a warp's S^T
  static constexpr int kDT = D / kOtherWarps / 8;                   // n8 tiles of dK, dV
  static constexpr int kWords = kBN / 64;                           // keep-bit words per tile row
  static_assert(kConfig.warps == 8 && kWarpKeys == 32 && kBM % kPassQ == 0,
                "4 x 2 warps of 32 keys; whole passes over the query tile");
  // dQ = dS K: the kBM x D tile as (kBM / 16) row tiles x kDqSplit column slices, one per warp.
  static constexpr int kDqRowTiles = kBM / 16, kDqSplit = kConfig.warps / kDqRowTiles;
  static constexpr int kDqNT = D / kDqSplit / 8;
  static_assert(kDqRowTiles * kDqSplit == kConfig.warps && kDqNT * 8 == 64,
                "one 64-column page of dQ per warp");
  using QTile = SmemTile<kBM, D>;
  using KTile = SmemTile<kBN, D>;
  using PTile = SmemTile<kBN, kBM>;  // P^T and dS^T, [key][query]
  // K, V; Q and dO double-buffered; P^T, dS^T; lse_log2 and delta double-buffered.
  static constexpr int kSmemBytes =
      2 * KTile::kBytes + 4 * QTile::kBytes + 2 * PTile::kBytes + 2 * 2 * kBM * 4;
};

// Stores a warp's 2 x NT accumulator tiles (rows row0 + 16m + g + 8h, columns col0 + 8n + 2t + j)
// into a shared tile as 16-bit pairs.
template <class T, int NT, class Tile>
__device__ __forceinline__ void store_shared(const float (&acc)[2][NT][4], const Tile& tile,
                                             int row0, int col0) {
  const int g = lane_id() / 4, t = lane_id() % 4;
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        st_shared_b32(tile.at(row0 + 16 * m + g + 8 * h, col0 + 8 * n + 2 * t),
                      pack2<T>(acc[m][n][2 * h], acc[m][n][2 * h + 1]));
}

template <class T, int D>
__global__ void __launch_bounds__(DkdvKernel<T, D>::kThreads)
    flash_bwd_dkdv_kernel(const BwdParams p) {
  using K = DkdvKernel<T, D>;
  SmemCarver carve(dynamic_smem());
  const auto sk = carve.tile<typename K::KTile>(), sv = carve.tile<typename K::KTile>();
  // Q and dO in two buffers each (item i in buffer i % 2), then P^T and dS^T.
  const auto sq0 = carve.tile<typename K::QTile>();
  carve.tile<typename K::QTile>();
  const auto sdo0 = carve.tile<typename K::QTile>();
  carve.tile<typename K::QTile>();
  const auto buffer = [](const typename K::QTile& first, int b) {
    return typename K::QTile{first.base + b * K::QTile::kBytes};
  };
  const auto sp = carve.tile<typename K::PTile>(), sds = carve.tile<typename K::PTile>();
  float* lse_s0 = carve.floats(2 * K::kBM);
  float* delta_s0 = carve.floats(2 * K::kBM);

  const detail::WorkItem w = detail::work_item(blockIdx.x, p.kv_heads, p.batch);
  const int tile = p.by_key.line(w), first = p.by_key.first(w, tile);
  const int entries = p.by_key.last(w, tile) - first, group = p.q_heads / p.kv_heads;
  const int key0 = tile * K::kBN;
  const int warp_key0 = warp_id() % K::kKeyWarps * K::kWarpKeys, other = warp_id() / K::kKeyWarps;
  const int warp_q0 = other * K::kWarpQ, warp_d0 = other * K::kDT * 8;
  const int64_t q_stride = int64_t(p.q_heads) * D, kv_stride = int64_t(p.kv_heads) * D;
  const int64_t kv_offset = (int64_t(w.batch) * p.k_len + key0) * kv_stride + int64_t(w.head) * D;
  const int g = lane_id() / 4, t = lane_id() % 4;

  // Work item i: query head group * w.head + i / entries, entry first + i % entries, in buffer
  // i % 2. Its Q and dO load as one cp.async group.
  const auto head_of = [&](int i) { return group * w.head + i / entries; };
  const auto load_item = [&](int i) {
    const int head = head_of(i), q0 = p.by_key.entries[first + i % entries].x, b = i % 2;
    const int64_t off = (int64_t(w.batch) * p.q_len + q0) * q_stride + int64_t(head) * D;
    load_tile_async<K::kThreads>(buffer(sq0, b), static_cast<const T*>(p.q) + off, q_stride,
                                 p.q_len - q0);
    load_tile_async<K::kThreads>(buffer(sdo0, b), static_cast<const T*>(p.dout) + off, q_stride,
                                 p.q_len - q0);
    cp_async_commit();
    if (threadIdx.x < K::kBM) {
      const int row = q0 + threadIdx.x;
      const int64_t r = (int64_t(w.batch) * p.q_heads + head) * p.q_len + row;
      lse_s0[b * K::kBM + threadIdx.x] = row < p.q_len ? p.lse_log2[r] : INFINITY;
      delta_s0[b * K::kBM + threadIdx.x] = row < p.q_len ? p.delta[r] : 0.f;
    }
  };

  float dk[2][K::kDT][4], dv[2][K::kDT][4];
  zero(dk), zero(dv);
  const int items = group * entries;
  if (items > 0) {
    load_tile_async<K::kThreads>(sk, static_cast<const T*>(p.k) + kv_offset, kv_stride,
                                 p.k_len - key0);
    load_tile_async<K::kThreads>(sv, static_cast<const T*>(p.v) + kv_offset, kv_stride,
                                 p.k_len - key0);
    load_item(0);
    cp_async_wait<0>();
    __syncthreads();  // K, V and item 0 landed
  }
  for (int i = 0; i < items; ++i) {
    const int head = head_of(i);
    const int2 entry = p.by_key.entries[first + i % entries];
    const auto sq = buffer(sq0, i % 2), sdo = buffer(sdo0, i % 2);
    const float* lse_s = lse_s0 + i % 2 * K::kBM;
    const float* delta_s = delta_s0 + i % 2 * K::kBM;
    // The other buffer's item ended with the barrier below (or the prologue's): load the next.
    if (i + 1 < items) load_item(i + 1);

      // Phase 1: P^T and dS^T of the warp's 32 keys, kWarpQ queries per pass, into shared memory.
#pragma unroll 1  // one pass at a time (overlapping them would spill)
    for (int j = warp_q0; j < K::kBM; j += K::kPassQ) {
      float s[2][K::kSNT][4];  // S^T, then P^T
      zero(s);
      warp_gemm<T, 2, K::kSNT, D / 16>(s, operand_a(sk, warp_key0, 0), operand_b(sq, j, 0));
      if (entry.y >= 0)
        mask_cols(s, p.by_key.bits + int64_t(entry.y) * K::kBM * K::kWords, K::kWords, warp_key0,
                  j);
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < K::kSNT; ++n)
#pragma unroll
          for (int c = 0; c < 4; ++c) {  // element c is at query j + 8n + 2t + c % 2
            const float lse = lse_s[j + 8 * n + 2 * t + c % 2];
            s[m][n][c] = fast_exp2(fmaf(s[m][n][c], p.scale_log2, -lse));
          }
      store_shared<T>(s, sp, warp_key0, j);

      float ds[2][K::kSNT][4];  // dP^T, then dS^T
      zero(ds);
      warp_gemm<T, 2, K::kSNT, D / 16>(ds, operand_a(sv, warp_key0, 0), operand_b(sdo, j, 0));
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int n = 0; n < K::kSNT; ++n)
#pragma unroll
          for (int c = 0; c < 4; ++c)
            ds[m][n][c] = s[m][n][c] * (ds[m][n][c] - delta_s[j + 8 * n + 2 * t + c % 2]);
      store_shared<T>(ds, sds, warp_key0, j);
    }
    __syncthreads();  // P^T and dS^T are complete

    // Phase 2: dV += P^T dO and dK += dS^T Q over the warp's 32 keys x D / 2 columns.
    warp_gemm<T, 2, K::kDT, K::kBM / 16>(dv, operand_a(sp, warp_key0, 0),
                                         operand_b_t(sdo, 0, warp_d0));
    warp_gemm<T, 2, K::kDT, K::kBM / 16>(dk, operand_a(sds, warp_key0, 0),
                                         operand_b_t(sq, 0, warp_d0));
    if (p.dq_accum) {  // dQ (rows 16 wm.., columns col0..) += dS K
      const int wm = warp_id() % K::kDqRowTiles;
      const int col0 = warp_id() / K::kDqRowTiles * K::kDqNT * 8;
      float dq[1][K::kDqNT][4];
      zero(dq);
      warp_gemm<T, 1, K::kDqNT, K::kBN / 16>(dq, operand_a_t(sds, 0, 16 * wm),
                                             operand_b_t(sk, 0, col0));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = entry.x + 16 * wm + g + 8 * h;
        if (row >= p.q_len) continue;
        float* dst = p.dq_accum + (int64_t(w.batch) * p.q_len + row) * q_stride +
                     int64_t(head) * D + col0 + 2 * t;
#pragma unroll
        for (int n = 0; n < K::kDqNT; ++n)
          red_add_f32x2(dst + 8 * n, dq[0][n][2 * h], dq[0][n][2 * h + 1]);
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // the next item landed; every warp is done with this item's buffers
  }

  const int64_t out = kv_offset + warp_key0 * kv_stride + warp_d0;
  const int valid = p.k_len - key0 - warp_key0;
  store_rows(dk, static_cast<T*>(p.dk) + out, kv_stride, valid, p.scale);
  store_rows(dv, static_cast<T*>(p.dv) + out, kv_stride, valid, 1.f);
}

// ---- 3. dQ: convert the atomic accumulator, or the deterministic query-tile-major kernel -------

template <class T>
__global__ void flash_bwd_convert_dq_kernel(const float* acc, T* dq, float scale, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    dq[i] = from_float<T>(acc[i] * scale);
}

// The backward tile with one warp per 16 query rows.
template <class T, int D> struct DqKernel {
  static constexpr detail::FlashConfig kConfig = detail::flash_config(FlashPass::backward, D);
  static constexpr int kBM = kConfig.block_m, kBN = kConfig.block_n;
  static constexpr int kThreads = 32 * (kBM / 16);
  static constexpr int kSub = 64, kSubNT = kSub / 8;  // keys, n8 tiles of a sub-tile
  static constexpr int kDT = D / 8, kWords = kBN / 64;
  static_assert(kBN % kSub == 0 && kSub == 64, "a sub-tile's keep bits are one word");
  using QTile = SmemTile<kBM, D>;
  using KTile = SmemTile<kBN, D>;
  static constexpr int kSmemBytes = 2 * QTile::kBytes + 2 * KTile::kBytes;
};

template <class T, int D>
__global__ void __launch_bounds__(DqKernel<T, D>::kThreads) flash_bwd_dq_kernel(const BwdParams p) {
  using K = DqKernel<T, D>;
  SmemCarver carve(dynamic_smem());
  const auto sq = carve.tile<typename K::QTile>(), sdo = carve.tile<typename K::QTile>();
  const auto sk = carve.tile<typename K::KTile>(), sv = carve.tile<typename K::KTile>();

  const detail::WorkItem w = detail::work_item(blockIdx.x, p.q_heads, p.batch);
  const int tile = p.by_query.line(w), first = p.by_query.first(w, tile);
  const int last = p.by_query.last(w, tile);
  const int q0 = tile * K::kBM, row0 = warp_id() * 16, kv_head = w.head / (p.q_heads / p.kv_heads);
  const int64_t q_stride = int64_t(p.q_heads) * D, kv_stride = int64_t(p.kv_heads) * D;
  const int64_t q_offset = (int64_t(w.batch) * p.q_len + q0) * q_stride + int64_t(w.head) * D;
  const int64_t kv_offset = int64_t(w.batch) * p.k_len * kv_stride + int64_t(kv_head) * D;

  float lse2[2], delta[2];  // of the thread's rows row0 + g + 8h
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = q0 + row0 + lane_id() / 4 + 8 * h;
    const int64_t r = (int64_t(w.batch) * p.q_heads + w.head) * p.q_len + row;
    lse2[h] = row < p.q_len ? p.lse_log2[r] : INFINITY;
    delta[h] = row < p.q_len ? p.delta[r] : 0.f;
  }
  float dq[1][K::kDT][4];
  zero(dq);
  if (first < last) {
    load_tile_async<K::kThreads>(sq, static_cast<const T*>(p.q) + q_offset, q_stride, p.q_len - q0);
    load_tile_async<K::kThreads>(sdo, static_cast<const T*>(p.dout) + q_offset, q_stride,
                                 p.q_len - q0);
  }
  for (int e = first; e < last; ++e) {
    const int2 entry = p.by_query.entries[e];
    const int64_t off = kv_offset + entry.x * kv_stride;
    load_tile_async<K::kThreads>(sk, static_cast<const T*>(p.k) + off, kv_stride,
                                 p.k_len - entry.x);
    load_tile_async<K::kThreads>(sv, static_cast<const T*>(p.v) + off, kv_stride,
                                 p.k_len - entry.x);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();  // K and V (and Q, dO) landed

#pragma unroll 1  // one sub-tile of kSub keys at a time (overlapping them would spill)
    for (int j = 0; j < K::kBN; j += K::kSub) {
      float s[1][K::kSubNT][4];  // S, then P
      zero(s);
      warp_gemm<T, 1, K::kSubNT, D / 16>(s, operand_a(sq, row0, 0), operand_b(sk, j, 0));
      if (entry.y >= 0)
        mask_rows(s, p.by_query.bits + int64_t(entry.y) * K::kBM * K::kWords, K::kWords, row0, j);
      float ds[1][K::kSubNT][4];  // dP, then dS
      zero(ds);
      warp_gemm<T, 1, K::kSubNT, D / 16>(ds, operand_a(sdo, row0, 0), operand_b(sv, j, 0));
#pragma unroll
      for (int n = 0; n < K::kSubNT; ++n)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const float prob = fast_exp2(fmaf(s[0][n][c], p.scale_log2, -lse2[c / 2]));
          ds[0][n][c] = prob * (ds[0][n][c] - delta[c / 2]);
        }
      warp_gemm<T, 1, K::kDT, K::kSub / 16>(dq, acc_operand<T>(ds), operand_b_t(sk, j, 0));
    }
    __syncthreads();  // every warp is done with K and V
  }
  store_rows(dq, static_cast<T*>(p.dq) + q_offset + row0 * q_stride, q_stride, p.q_len - q0 - row0,
             p.scale);
}

// The launches of flash_attention_backward after its checks (the kernel_emu tests call it on host
// tensors).
void run_flash_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                        const Tensor& lse, const Tensor& dout, const DeviceTileMap& map,
                        double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        cudaStream_t stream, bool deterministic) {
  const char* op = "flash_attention_backward";
  const int batch = static_cast<int>(q.size(0)), q_len = static_cast<int>(q.size(1));
  const int q_heads = static_cast<int>(q.size(2)), kv_heads = static_cast<int>(k.size(2));
  const Device dev = q.device();
  const Tensor delta = scratch_tensor(op, lse.shape(), DType::f32, dev, stream);  // (B, Hq, Tq)
  const Tensor lse_log2 = scratch_tensor(op, lse.shape(), DType::f32, dev, stream);
  Tensor dq_accum;  // (B, Tq, Hq, D) f32
  if (!deterministic) {
    dq_accum = scratch_tensor(op, q.shape(), DType::f32, dev, stream);
    CUDA_CHECK(cudaMemsetAsync(dq_accum.data_ptr(), 0, dq_accum.nbytes(), stream));
  }
  const BwdParams p{q.data_ptr(),
                    k.data_ptr(),
                    v.data_ptr(),
                    dout.data_ptr(),
                    lse_log2.data<float>(),
                    delta.data<float>(),
                    deterministic ? nullptr : dq_accum.data<float>(),
                    dq.data_ptr(),
                    dk.data_ptr(),
                    dv.data_ptr(),
                    list_view(map, true),
                    list_view(map, false),
                    batch,
                    q_len,
                    static_cast<int>(k.size(1)),
                    q_heads,
                    kv_heads,
                    static_cast<float>(scale),
                    static_cast<float>(scale * kLog2e)};
  const unsigned dkdv_grid = detail::flash_grid_size(op, kv_heads, batch, map.num_k_tiles);
  const unsigned dq_grid = detail::flash_grid_size(op, q_heads, batch, map.num_q_tiles);
  dispatch_flash(q.dtype(), q.size(3), [&](auto tag, auto head_dim) {
    using T = decltype(tag);
    const int64_t rows = int64_t(batch) * q_len * q_heads;
    if (rows > 0)
      launch(flash_bwd_preprocess_kernel<T>, grid_for(rows * 32, 256), 256, 0, stream,
             static_cast<const T*>(out.data_ptr()), static_cast<const T*>(dout.data_ptr()),
             lse.data<float>(), delta.data<float>(), lse_log2.data<float>(), batch, q_len, q_heads,
             head_dim);
    using Dkdv = DkdvKernel<T, head_dim>;
    if (dkdv_grid > 0)
      launch_with_smem(flash_bwd_dkdv_kernel<T, head_dim>, dkdv_grid, Dkdv::kThreads,
                       Dkdv::kSmemBytes, stream, p);
    using Dq = DqKernel<T, head_dim>;
    if (deterministic && dq_grid > 0)
      launch_with_smem(flash_bwd_dq_kernel<T, head_dim>, dq_grid, Dq::kThreads, Dq::kSmemBytes,
                       stream, p);
    if (!deterministic && rows > 0)
      launch(flash_bwd_convert_dq_kernel<T>, grid_for(dq.numel(), 256), 256, 0, stream,
             dq_accum.data<float>(), static_cast<T*>(dq.data_ptr()), p.scale, dq.numel());
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                              const Tensor& lse, const Tensor& dout, const DeviceTileMap& map,
                              double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                              cudaStream_t stream, bool deterministic) {
  detail::check_flash_backward(q, k, v, out, lse, dout, map, scale, dq, dk, dv);
  run_flash_backward(q, k, v, out, lse, dout, map, scale, dq, dk, dv, stream, deterministic);
}

}  // namespace sprig::cuda
