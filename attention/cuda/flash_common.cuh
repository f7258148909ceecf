// Device helpers shared by the flash-attention kernels (flash_fwd.cu, flash_bwd.cu): swizzled
// shared-memory tiles, cp.async tile loads, ldmatrix operands, the warp GEMM on the m16n8k16 MMA,
// keep-bit masking, and the device view of an uploaded tile map. The PTX instructions themselves
// are wrapped in tensor/cuda/ptx.cuh.
//
// Fragments of mma.m16n8k16 (g = lane / 4, t = lane % 4; docs/kernels.md §4.3):
//   C, a 16x8 fp32 tile: c[0], c[1] at (row g, cols 2t, 2t+1); c[2], c[3] at row g + 8.
//   A, 16x16: a[0] (row g, k 2t..2t+1), a[1] (row g+8, same k), a[2] (row g, k 2t+8..2t+9), a[3]
//   (row g+8, k 2t+8..). B, 16x8: b[0] (k 2t..2t+1, col g), b[1] (k 2t+8..2t+9, col g).
// Two C tiles side by side (columns 0-7 and 8-15) therefore hold exactly one A fragment: a 16-bit
// copy of an accumulator is an A operand without leaving registers (AccOperand).
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <type_traits>
#include <utility>

#include "attention/cuda/flash_plan.h"
#include "tensor/cuda/common.cuh"

namespace sprig::cuda::flash {

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ int lane_id() { return threadIdx.x % 32; }
__device__ __forceinline__ int warp_id() { return threadIdx.x / 32; }

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Two floats as one 32-bit register of two 16-bit values (lo in the low half).
template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// ---- shared-memory tiles ----------------------------------------------------------------------

// A ROWS x COLS tile of 16-bit values in shared memory, COLS a multiple of 64, stored as COLS/64
// pages of ROWS x 64. Each 128-byte page row holds eight 16-byte chunks; chunk c of row r sits at
// position c ^ (r % 8), so the 8 row addresses of an ldmatrix phase hit 8 distinct bank groups.
template <int ROWS, int COLS> struct SmemTile {
  static_assert(COLS % 64 == 0 && ROWS % 8 == 0);
  static constexpr int kRows = ROWS, kCols = COLS, kBytes = ROWS * COLS * 2;
  uint32_t base;  // shared-space address

  __device__ uint32_t at(int row, int col) const {
    const int chunk = ((col % 64) / 8) ^ (row % 8);
    return base + 2 * ((col / 64) * ROWS * 64 + row * 64 + chunk * 8 + col % 8);
  }
};

// Carves consecutive tiles (and float arrays) out of the dynamic shared memory.
class SmemCarver {
 public:
  __device__ explicit SmemCarver(void* smem)
      : base_(static_cast<uint32_t>(__cvta_generic_to_shared(smem))), generic_(smem) {}
  template <class Tile> __device__ Tile tile() {
    const Tile t{base_ + used_};
    used_ += Tile::kBytes;
    return t;
  }
  __device__ float* floats(int n) {
    float* p = reinterpret_cast<float*>(static_cast<char*>(generic_) + used_);
    used_ += 4 * n;
    return p;
  }

 private:
  uint32_t base_, used_ = 0;
  void* generic_;
};

// ---- cp.async tile loads ----------------------------------------------------------------------

// All NTHREADS threads copy rows [0, Tile::kRows) of a row-major global matrix (row stride
// `stride` elements) into `tile`; rows >= valid_rows (>= 1) are zero-filled. Each pass copies
// NTHREADS / (kCols / 8) whole rows, a multiple of 8, so a thread's chunk keeps its swizzle.
template <int NTHREADS, class Tile> struct TileChunks {
  static constexpr int kChunksPerRow = Tile::kCols / 8, kRowsPerPass = NTHREADS / kChunksPerRow;
  static_assert(NTHREADS % kChunksPerRow == 0 && kRowsPerPass % 8 == 0 &&
                Tile::kRows % kRowsPerPass == 0);
  int row, col;  // this thread's first chunk: rows row + i * kRowsPerPass, 8 columns from col
  __device__ __forceinline__ TileChunks() {
    const int tid = fresh_thread();
    row = tid / kChunksPerRow;
    col = tid % kChunksPerRow * 8;
  }
};

template <int NTHREADS, class Tile, class T>
__device__ __forceinline__ void load_tile_async(const Tile& tile, const T* src, int64_t stride,
                                                int valid_rows) {
  using Chunks = TileChunks<NTHREADS, Tile>;
  constexpr int kRowsPerPass = Chunks::kRowsPerPass;
  const auto [row, col] = Chunks();
  const uint32_t dst = pin(tile.at(row, col));
  const T* src_row = src + row * stride + col;
#pragma unroll
  for (int i = 0; i < Tile::kRows / kRowsPerPass; ++i) {
    const bool valid = row + i * kRowsPerPass < valid_rows;
    cp_async_16(dst + i * kRowsPerPass * 128, valid ? src_row + i * kRowsPerPass * stride : src,
                valid);
  }
}

// All NTHREADS threads copy rows [0, valid_rows) of `tile` to a row-major global matrix (row
// stride `stride` elements) in 16-byte chunks, rows >= valid_rows untouched: the mirror of
// load_tile_async, with the same chunk per thread (the NTHREADS / (kCols / 8) threads of a pass
// write whole rows). The tile's stores must be ordered before the call (a barrier).
template <int NTHREADS, class Tile, class T>
__device__ __forceinline__ void store_tile(const Tile& tile, T* dst, int64_t stride,
                                           int valid_rows) {
  using Chunks = TileChunks<NTHREADS, Tile>;
  constexpr int kRowsPerPass = Chunks::kRowsPerPass;
  const auto [row, col] = Chunks();
  // The generic address of the chunk (a shared-window pointer: ld.shared).
  unsigned char* const smem = dynamic_smem();
  const uint4* src = reinterpret_cast<const uint4*>(
      smem + (pin(tile.at(row, col)) - static_cast<uint32_t>(__cvta_generic_to_shared(smem))));
  T* dst_row = dst + row * stride + col;
#pragma unroll
  for (int i = 0; i < Tile::kRows / kRowsPerPass; ++i)
    if (row + i * kRowsPerPass < valid_rows)
      *reinterpret_cast<uint4*>(dst_row + i * kRowsPerPass * stride) = src[i * kRowsPerPass * 8];
}

// ---- MMA operands -----------------------------------------------------------------------------

// One warp's view of a tile as an MMA operand from an origin (row0 % 8 == 0, col0 % 16 == 0):
// addr[j] is the lane's ldmatrix row address in 16-column block j of the origin's page (blocks
// further right, in later pages, need col0 % 64 == 0). load(i, ks) reads the 16x16 block i along
// M (A operands) or the pair of n8 tiles i along N (B operands), at k block ks; every address is
// then addr[j] plus a constant, which the compiler folds into the instruction.
template <class Tile, bool Trans, bool RowsAreK> struct SmemOperand {
  uint32_t addr[4];

  __device__ Frag load(int i, int ks) const {
    const unsigned row_block = RowsAreK ? ks : i, col_block = RowsAreK ? i : ks;
    const uint32_t a = addr[col_block % 4] + col_block / 4 * Tile::kRows * 128 + row_block * 2048;
    return Trans ? ldsm_x4_trans(a) : ldsm_x4(a);
  }
};

// The lane's row and column in the two address patterns of ldmatrix.x4 (lanes 8i..8i+7 address
// the rows of 8x8 matrix i): "row pairs" orders the matrices (r, c), (r+8, c), (r, c+8),
// (r+8, c+8) as the registers of an A fragment; "column pairs" orders them (r, c), (r, c+8),
// (r+8, c), (r+8, c+8) as the B fragments of two n8 tiles.
template <bool RowPairs, bool Trans, bool RowsAreK, class Tile>
__device__ __forceinline__ SmemOperand<Tile, Trans, RowsAreK> smem_operand(const Tile& tile,
                                                                           int row0, int col0) {
  const int lane = fresh_lane();
  const int row = row0 + (RowPairs ? lane % 16 : lane % 8 + lane / 16 * 8);
  const int col = col0 + (RowPairs ? lane / 16 * 8 : lane / 8 % 2 * 8);
  SmemOperand<Tile, Trans, RowsAreK> op;
#pragma unroll
  for (int j = 0; j < 4; ++j) op.addr[j] = pin(tile.at(row, col + 16 * j));
  return op;
}

// A stored [m][k], origin (m0, k0).
template <class Tile> __device__ __forceinline__ auto operand_a(const Tile& t, int m0, int k0) {
  return smem_operand<true, false, false>(t, m0, k0);
}
// A stored transposed, [k][m], origin (k0, m0).
template <class Tile> __device__ __forceinline__ auto operand_a_t(const Tile& t, int k0, int m0) {
  return smem_operand<false, true, true>(t, k0, m0);
}
// B stored [n][k] (B^T row-major, as K in Q K^T), origin (n0, k0).
template <class Tile> __device__ __forceinline__ auto operand_b(const Tile& t, int n0, int k0) {
  return smem_operand<false, false, false>(t, n0, k0);
}
// B stored [k][n] (as V in P V), origin (k0, n0).
template <class Tile> __device__ __forceinline__ auto operand_b_t(const Tile& t, int k0, int n0) {
  return smem_operand<true, true, true>(t, k0, n0);
}

// One warp: acc (MT x NT tiles of 16x8) += A (MT*16 x KSTEPS*16) * B (KSTEPS*16 x NT*8), where
// a.load(m, ks) gives the A fragment of rows 16m.., k 16ks.. (an SmemOperand or AccOperand) and
// b.load(n2, ks) the B fragments of the n8 tiles 2*n2 and 2*n2 + 1 at k 16ks.. (an SmemOperand).
// The k blocks are walked 4 at a time (one 64-wide page), unrolled within a page and looping over
// pages: fully unrolled, the compiler schedules the fragment loads of the whole K range early
// and runs out of registers.
template <class T, int MT, int NT, int KSTEPS, class A, class B>
__device__ __forceinline__ void warp_gemm(float (&acc)[MT][NT][4], const A& a_op, const B& b_op) {
  static_assert(NT % 2 == 0 && (KSTEPS <= 4 || KSTEPS % 4 == 0));
  constexpr int kPerPage = KSTEPS < 4 ? KSTEPS : 4;
#pragma unroll 1
  for (int page = 0; page < KSTEPS / kPerPage; ++page) {
#pragma unroll
    for (int u = 0; u < kPerPage; ++u) {
      const int ks = page * kPerPage + u;
      Frag a[MT];
#pragma unroll
      for (int m = 0; m < MT; ++m) a[m] = a_op.load(m, ks);
#pragma unroll
      for (int n2 = 0; n2 < NT / 2; ++n2) {
        const Frag b = b_op.load(n2, ks);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          mma<T>(acc[m][2 * n2], a[m], b.r[0], b.r[1]);
          mma<T>(acc[m][2 * n2 + 1], a[m], b.r[2], b.r[3]);
        }
      }
    }
  }
}

// Accumulator tiles (MT x NT of 16x8) as the A operand of a following GEMM, in 16-bit: block
// (m, ks) is the pair of tiles (m, 2ks), (m, 2ks + 1), whose registers are exactly an A fragment.
template <class T, int MT, int NT> struct AccOperand {
  const float (&acc)[MT][NT][4];

  __device__ Frag load(int m, int ks) const {
    const float(&lo)[4] = acc[m][2 * ks];
    const float(&hi)[4] = acc[m][2 * ks + 1];
    return {{pack2<T>(lo[0], lo[1]), pack2<T>(lo[2], lo[3]), pack2<T>(hi[0], hi[1]),
             pack2<T>(hi[2], hi[3])}};
  }
};
template <class T, int MT, int NT>
__device__ __forceinline__ AccOperand<T, MT, NT> acc_operand(const float (&acc)[MT][NT][4]) {
  return {acc};
}

template <int MT, int NT> __device__ __forceinline__ void zero(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][n][i] = 0.f;
}

// Stores the accumulator rows of one warp (scaled by `scale`) as 16-bit pairs: tile (m, n) element
// (row 16m + g + 8h, col 8n + 2t + j) goes to dst[row * stride + col]; rows >= valid_rows skipped.
template <class T, int MT, int NT>
__device__ void store_rows(const float (&acc)[MT][NT][4], T* dst, int64_t stride, int valid_rows,
                           float scale) {
  const int g = lane_id() / 4, t = lane_id() % 4;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = 16 * m + g + 8 * h;
      if (row >= valid_rows) continue;
#pragma unroll
      for (int n = 0; n < NT; ++n)
        *reinterpret_cast<uint32_t*>(dst + row * stride + 8 * n + 2 * t) =
            pack2<T>(acc[m][n][2 * h] * scale, acc[m][n][2 * h + 1] * scale);
    }
}

// ---- tile maps --------------------------------------------------------------------------------

// The device view of one list of an uploaded tile map (DeviceTileMap, flash.h).
struct TileListView {
  const int* ptr;
  const int2* entries;  // (start, mask_idx), mask_idx < 0 for full tiles
  const int* order;
  const uint64_t* bits;
  int map_rows, lines_per_row;

  // The line (query or key tile index) and the entry range of CTA work item `w`.
  __device__ int line(const detail::WorkItem& w) const {
    return order[detail::map_row(w.batch, map_rows) * lines_per_row + w.rank];
  }
  __device__ int first(const detail::WorkItem& w, int line) const {
    return ptr[detail::map_row(w.batch, map_rows) * lines_per_row + line];
  }
  __device__ int last(const detail::WorkItem& w, int line) const {
    return ptr[detail::map_row(w.batch, map_rows) * lines_per_row + line + 1];
  }
};

// Calls f(T{}, std::integral_constant<int, D>{}) for a bf16/f16 dtype and head dim 64/128 (the
// launchers' checks guarantee both): the only instantiations of every kernel.
template <class F> void dispatch_flash(DType dtype, int64_t head_dim, F&& f) {
  const auto with_head_dim = [&](auto tag) {
    if (head_dim == 64)
      f(tag, std::integral_constant<int, 64>{});
    else
      f(tag, std::integral_constant<int, 128>{});
  };
  if (dtype == DType::bf16)
    with_head_dim(__nv_bfloat16{});
  else
    with_head_dim(__half{});
}

// Runs set_limit() (which raises `kernel`'s dynamic shared memory limit) once per kernel and
// device, under a lock: a thread that finds the limit raised, or waits for it, launches after it
// is in place on that device.
template <class SetLimit> void raise_smem_limit_once(const void* kernel, SetLimit&& set_limit) {
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> raised;
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard<std::mutex> lock(mutex);
  if (raised.count({kernel, device})) return;
  CUDA_CHECK(set_limit());
  raised.emplace(kernel, device);
}

// Launches `kernel` with `smem` bytes of dynamic shared memory, a kernel instance's fixed size.
template <class Kernel, class Params>
void launch_with_smem(Kernel kernel, unsigned grid, int threads, int smem, cudaStream_t stream,
                      const Params& params) {
  raise_smem_limit_once(reinterpret_cast<const void*>(kernel), [&] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  });
  launch(kernel, grid, threads, smem, stream, params);
}

inline TileListView list_view(const DeviceTileMap& map, bool by_key) {
  const DeviceTileList& l = by_key ? map.by_key : map.by_query;
  return {l.ptr.data<int32_t>(),
          static_cast<const int2*>(l.entries.data_ptr()),
          l.order.data<int32_t>(),
          static_cast<const uint64_t*>(map.bits.data_ptr()),
          map.num_rows,
          by_key ? map.num_k_tiles : map.num_q_tiles};
}

// The keep bits of a partial tile (see TileMap::bits): `bits` points at the tile's first word,
// each tile row has `words` 64-bit words.

// Scores of one warp, MT x 16 rows (tile rows row0 + 16m + g + 8h) by NT*8 keys (tile keys
// key0 + 8n + 2t + j, within one 64-key word): elements whose keep bit is 0 become -inf.
template <int MT, int NT>
__device__ __forceinline__ void mask_rows(float (&s)[MT][NT][4], const uint64_t* bits, int words,
                                          int row0, int key0) {
  static_assert(NT <= 8);
  const int g = lane_id() / 4, t = lane_id() % 4;
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint64_t word =
          __ldg(bits + (row0 + 16 * m + g + 8 * h) * words + key0 / 64) >> (key0 % 64 + 2 * t);
#pragma unroll
      for (int n = 0; n < NT; ++n)
#pragma unroll
        for (int j = 0; j < 2; ++j)
          if (!((word >> (8 * n + j)) & 1)) s[m][n][2 * h + j] = -INFINITY;
    }
}

// Scores S^T of one warp, 2 x 16 keys (tile keys key0 + 16m + g + 8h, key0 % 32 == 0) by NT*8
// queries (tile queries q0 + 8n + 2t + j): elements whose keep bit is 0 become -inf.
template <int NT>
__device__ __forceinline__ void mask_cols(float (&s)[2][NT][4], const uint64_t* bits, int words,
                                          int key0, int q0) {
  const int g = lane_id() / 4, t = lane_id() % 4;
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const uint64_t word =
          __ldg(bits + (q0 + 8 * n + 2 * t + j) * words + key0 / 64) >> (key0 % 64 + g);
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (!((word >> (16 * m + 8 * h)) & 1)) s[m][n][2 * h + j] = -INFINITY;
    }
}

}  // namespace sprig::cuda::flash
