// CUDA flash-attention forward (docs/kernels.md §4.1-§4.7), driven by the tile map's by_query
// lists.
//
// One CTA per (query tile, head, batch row), 4 warps, each warp owning 32 whole query rows, so
// the online softmax row statistics never leave the warp. Q stays in swizzled shared memory; K
// and V have two buffers each, and while entry e is computed from one pair, the copies of K and
// V of entry e + 1 fill the other: each copy overlaps a whole entry of GEMMs, and no entry but the
// first (whose V copy overlaps only its first S = Q K^T) waits inside. Each key tile is processed
// in sub-tiles (64 keys at head dim 64, 32 at 128) so that S and the O accumulator fit the register
// file without spills. P goes from the S accumulator to the A operand of P V in registers. The
// tile's entries are walked partial tiles first (keep-bit predicate, -inf-safe softmax), then full
// tiles (no predicate). The epilogue stages the normalised O tile in Q's buffer and writes it out
// in 16-byte row chunks.
//
// Shapes: q, out [B, Tq, Hq, D]; k, v [B, Tk, Hkv, D]; lse [B, Hq, Tq] (f32, natural log).
#include "attention/cuda/flash_common.cuh"

namespace sprig::cuda {

namespace {

using namespace flash;

template <class T, int D> struct FwdKernel {
  static constexpr detail::FlashConfig kConfig = detail::flash_config(FlashPass::forward, D);
  static constexpr int kBM = kConfig.block_m, kBN = kConfig.block_n;
  static constexpr int kThreads = 32 * kConfig.warps;
  static constexpr int kMT = kBM / 16 / kConfig.warps;      // m16 tiles per warp
  static constexpr int kSub = 4096 / D, kSubNT = kSub / 8;  // keys and n8 tiles of a sub-tile
  static constexpr int kDT = D / 8;                         // n8 tiles of O
  static constexpr int kWords = kBN / 64;                   // keep-bit words per tile row
  static_assert(kBM == 16 * kMT * kConfig.warps && kBN % kSub == 0 && 64 % kSub == 0,
                "whole m16 tiles per warp; a sub-tile's keep bits lie in one word");
  using QTile = SmemTile<kBM, D>;
  using KTile = SmemTile<kBN, D>;
  static constexpr int kSmemBytes = QTile::kBytes + 4 * KTile::kBytes;  // Q (then O), 2 x (K, V)
};

struct FwdParams {
  const void *q, *k, *v;
  void* out;
  float* lse;
  TileListView map;
  int batch, q_len, k_len, q_heads, kv_heads;
  float scale, scale_log2;  // scale, scale * log2(e)
};

// Online softmax over one sub-tile of scores s (raw units), turned into P in place; rescales o,
// and updates the running row max (raw units) and the per-thread partial row sums. Partial tiles
// may leave a row's max at -inf: exponents then use 0 as the subtrahend, so -inf - -inf never
// occurs.
template <bool Partial, int MT, int NT, int DT>
__device__ __forceinline__ void online_softmax(float (&s)[MT][NT][4], float (&o)[MT][DT][4],
                                               float (&row_max)[MT][2], float (&row_sum)[MT][2],
                                               float scale_log2) {
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = row_max[m][h];
#pragma unroll
      for (int n = 0; n < NT; ++n) mx = fmaxf(mx, fmaxf(s[m][n][2 * h], s[m][n][2 * h + 1]));
      mx = quad_max(mx);
      const float sub = Partial && mx == -INFINITY ? 0.f : mx * scale_log2;
      const float alpha = fast_exp2(row_max[m][h] * scale_log2 - sub);
      row_max[m][h] = mx;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          float& x = s[m][n][2 * h + j];
          x = fast_exp2(fmaf(x, scale_log2, -sub));
          sum += x;
        }
      row_sum[m][h] = row_sum[m][h] * alpha + sum;
#pragma unroll
      for (int d = 0; d < DT; ++d) o[m][d][2 * h] *= alpha, o[m][d][2 * h + 1] *= alpha;
    }
}

// Stores the rows of one warp's accumulator tiles (MT x NT of 16x8, tile rows row0 + 16m + g + 8h,
// columns 8n + 2t + j) into `tile` as 16-bit pairs, one 4-byte store each: the 8 rows x 4 pairs of
// one store instruction lie in 32 distinct banks thanks to the swizzle.
template <class T, int MT, int NT, class Tile>
__device__ __forceinline__ void stage_rows(const float (&acc)[MT][NT][4], const Tile& tile,
                                           int row0) {
  const int g = lane_id() / 4, t = lane_id() % 4;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int n = 0; n < NT; ++n)
        st_shared_b32(tile.at(row0 + 16 * m + g + 8 * h, 8 * n + 2 * t),
                      pack2<T>(acc[m][n][2 * h], acc[m][n][2 * h + 1]));
}

template <class T, int D>
__global__ void __launch_bounds__(FwdKernel<T, D>::kThreads) flash_fwd_kernel(const FwdParams p) {
  using K = FwdKernel<T, D>;
  SmemCarver carve(dynamic_smem());
  const auto sq = carve.tile<typename K::QTile>();
  const auto skv = carve.tile<typename K::KTile>();  // K 0, K 1, V 0, V 1
  const auto k_buffer = [&](int i) { return typename K::KTile{skv.base + i * K::KTile::kBytes}; };
  const auto v_buffer = [&](int i) {
    return typename K::KTile{skv.base + (2 + i) * K::KTile::kBytes};
  };

  const detail::WorkItem w = detail::work_item(blockIdx.x, p.q_heads, p.batch);
  const int tile = p.map.line(w), first = p.map.first(w, tile), last = p.map.last(w, tile);
  const int q0 = tile * K::kBM, kv_head = w.head / (p.q_heads / p.kv_heads);
  const int64_t q_stride = int64_t(p.q_heads) * D, kv_stride = int64_t(p.kv_heads) * D;
  const int64_t q_offset =
      (int64_t(w.batch) * p.q_len + q0) * q_stride + int64_t(w.head) * D;  // of q and out
  const int64_t kv_offset = int64_t(w.batch) * p.k_len * kv_stride + int64_t(kv_head) * D;
  const T* k = static_cast<const T*>(p.k) + kv_offset;
  const T* v = static_cast<const T*>(p.v) + kv_offset;
  const int row0 = warp_id() * K::kMT * 16;  // the warp's first row in the tile

  // The copies of K and V of entry e into buffer pair b, committed as one group.
  const auto load_kv = [&](int e, int b) {
    const int key0 = p.map.entries[e].x;
    load_tile_async<K::kThreads>(k_buffer(b), k + key0 * kv_stride, kv_stride, p.k_len - key0);
    load_tile_async<K::kThreads>(v_buffer(b), v + key0 * kv_stride, kv_stride, p.k_len - key0);
    cp_async_commit();
  };
  float o[K::kMT][K::kDT][4], row_max[K::kMT][2], row_sum[K::kMT][2];
  zero(o);
#pragma unroll
  for (int m = 0; m < K::kMT; ++m)
    row_max[m][0] = row_max[m][1] = -INFINITY, row_sum[m][0] = row_sum[m][1] = 0.f;

  // Entry e: S = Q K^T, mask (partial tiles), softmax, O += P V, sub-tile by sub-tile, from buffer
  // pair (e - first) % 2. Groups in flight on entry: (Q, K_first) and (V_first) at the first
  // entry, (K_e, V_e) at the others.
  const auto step = [&](int e, auto partial) {
    const int2 entry = p.map.entries[e];
    const bool prefetch = e + 1 < last, at_first = e == first;
    if (at_first)
      cp_async_wait<1>();
    else
      cp_async_wait<0>();
    __syncthreads();  // K_e (and V_e, Q) landed; every warp is done with the other buffer pair
    if (prefetch) load_kv(e + 1, (e + 1 - first) % 2);
    const auto sk = k_buffer((e - first) % 2), sv = v_buffer((e - first) % 2);
#pragma unroll 1  // one sub-tile at a time (overlapping them would spill)
    for (int j = 0; j < K::kBN / K::kSub; ++j) {
      float s[K::kMT][K::kSubNT][4];
      zero(s);
      warp_gemm<T, K::kMT, K::kSubNT, D / 16>(s, operand_a(sq, row0, 0),
                                              operand_b(sk, j * K::kSub, 0));
      if constexpr (decltype(partial)::value)
        mask_rows(s, p.map.bits + int64_t(entry.y) * K::kBM * K::kWords, K::kWords, row0,
                  j * K::kSub);
      online_softmax<decltype(partial)::value>(s, o, row_max, row_sum, p.scale_log2);
      if (at_first && j == 0) {  // only V_first may still be in flight
        if (prefetch)
          cp_async_wait<1>();
        else
          cp_async_wait<0>();
        __syncthreads();  // V landed
      }
      warp_gemm<T, K::kMT, K::kDT, K::kSub / 16>(o, acc_operand<T>(s),
                                                 operand_b_t(sv, j * K::kSub, 0));
    }
  };

  if (first < last) {
    load_tile_async<K::kThreads>(sq, static_cast<const T*>(p.q) + q_offset, q_stride, p.q_len - q0);
    const int key0 = p.map.entries[first].x;
    load_tile_async<K::kThreads>(k_buffer(0), k + key0 * kv_stride, kv_stride, p.k_len - key0);
    cp_async_commit();
    load_tile_async<K::kThreads>(v_buffer(0), v + key0 * kv_stride, kv_stride, p.k_len - key0);
    cp_async_commit();
    int e = first;
    for (; e < last && p.map.entries[e].y >= 0; ++e) step(e, std::true_type{});
    for (; e < last; ++e) step(e, std::false_type{});
  }

  // Epilogue: O / l and lse; rows no key reached (l = 0, including tiles without entries) get
  // O = 0 and lse = -inf.
  const int g = lane_id() / 4;
#pragma unroll
  for (int m = 0; m < K::kMT; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float l = quad_sum(row_sum[m][h]);
      const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
      for (int d = 0; d < K::kDT; ++d) o[m][d][2 * h] *= inv, o[m][d][2 * h + 1] *= inv;
      const int row = q0 + row0 + 16 * m + g + 8 * h;
      if (lane_id() % 4 == 0 && row < p.q_len)
        p.lse[(int64_t(w.batch) * p.q_heads + w.head) * p.q_len + row] =
            l > 0.f ? row_max[m][h] * p.scale + logf(l) : -INFINITY;
    }
  // O goes through Q's buffer: each warp overwrites only its own 32 rows, which no other warp
  // reads, and its last reads of them are ldmatrix results its finished MMAs consumed; no copy
  // is in flight (the last entry waited for all of them).
  stage_rows<T>(o, sq, row0);
  __syncthreads();  // the O tile is complete
  store_tile<K::kThreads>(sq, static_cast<T*>(p.out) + q_offset, q_stride, p.q_len - q0);
}

// The launch of flash_attention_forward after its checks (the kernel_emu tests call it on host
// tensors).
void run_flash_forward(const Tensor& q, const Tensor& k, const Tensor& v, const DeviceTileMap& map,
                       double scale, const Tensor& out, const Tensor& lse, cudaStream_t stream) {
  const FwdParams p{q.data_ptr(),
                    k.data_ptr(),
                    v.data_ptr(),
                    out.data_ptr(),
                    lse.data<float>(),
                    list_view(map, false),
                    static_cast<int>(q.size(0)),
                    static_cast<int>(q.size(1)),
                    static_cast<int>(k.size(1)),
                    static_cast<int>(q.size(2)),
                    static_cast<int>(k.size(2)),
                    static_cast<float>(scale),
                    static_cast<float>(scale * kLog2e)};
  const unsigned grid =
      detail::flash_grid_size("flash_attention_forward", p.q_heads, p.batch, map.num_q_tiles);
  if (grid == 0) return;
  dispatch_flash(q.dtype(), q.size(3), [&](auto tag, auto head_dim) {
    using K = FwdKernel<decltype(tag), head_dim>;
    launch_with_smem(flash_fwd_kernel<decltype(tag), head_dim>, grid, K::kThreads, K::kSmemBytes,
                     stream, p);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const DeviceTileMap& map, double scale, const Tensor& out,
                             const Tensor& lse, cudaStream_t stream) {
  detail::check_flash_forward(q, k, v, map, scale, out, lse);
  run_flash_forward(q, k, v, map, scale, out, lse, stream);
}

}  // namespace sprig::cuda
