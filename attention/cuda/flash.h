// CUDA flash attention (KERNELS §1, stage 1: FA2 structure on mma.sync m16n8k16, bf16/f16 inputs,
// fp32 accumulation), forward and backward, driven by the block-sparse tile map of tile_map.h.
//
// Layouts (all contiguous, one CUDA device, q/k/v of one dtype, bf16 or f16):
//   q, out, dout, dq [B, Tq, Hq, D]; k, v, dk, dv [B, Tk, Hkv, D]; lse [B, Hq, Tq] f32.
// D is 64 or 128. GQA is native: query head h reads kv head h / (Hq / Hkv), without K/V copies.
// Scores are scale * q.k (scale > 0); lse is the natural-log sum of exp over the allowed keys.
// A fully masked query row gets out = 0, lse = -inf and zero gradients. Every output is written
// with `=`. Batch row b uses mask row b of the map, or row 0 when the map is shared (1 row).
//
// Each pass runs on a tile map compiled for its own tile shape, flash_tile_shape(pass, D):
// compile it once per batch (compile_tile_map), upload it once (upload_tile_map), and share it
// by every layer and head. Scratch buffers of the backward come from the device's caching
// allocator, which is ordered on cuda::current_stream(device): pass that stream.
#pragma once

#include <cstdint>

#include "attention/tile_map.h"
#include "tensor/cuda/kernels.h"
#include "tensor/tensor.h"

namespace sprig::cuda {

enum class FlashPass { forward, backward };

struct TileShape {
  int32_t block_m = 0, block_n = 0;  // queries x keys per tile
  bool operator==(const TileShape&) const = default;
};

// The tile shape a pass's kernels need at head dim 64 or 128 (throws "[flash_tile_shape] ..."
// otherwise): forward 128 x 128 (D 64) / 128 x 64 (D 128), backward 128 x 128 / 64 x 128.
TileShape flash_tile_shape(FlashPass pass, int64_t head_dim);

// One CSR list of a TileMap on the device (see TileList): i32 tensors.
struct DeviceTileList {
  Tensor ptr;  // [num_rows * lines_per_row + 1]
  Tensor entries;  // [entries, 2]: (start, mask_idx), mask_idx -1 for a full tile
  Tensor order;  // [num_rows * lines_per_row]: the LPT order of the lines of each mask row
};

// A TileMap uploaded to one device: the scalars stay on the host, the arrays are tensors.
struct DeviceTileMap {
  int32_t num_rows = 0, q_len = 0, k_len = 0;
  int32_t block_m = 0, block_n = 0, num_q_tiles = 0, num_k_tiles = 0, words_per_row = 0;
  DeviceTileList by_query, by_key;
  Tensor bits;  // i64 [partial tiles * block_m * words_per_row], TileMap::bits reinterpreted
  Device device() const { return bits.device(); }
};

// Packs and copies `map` to `device` (any device; the kernels need a CUDA one). Throws
// "[upload_tile_map] ..." when a list breaks the order the kernels rely on (partial entries first
// in each line, mask_idx >= 0 exactly for partial entries).
DeviceTileMap upload_tile_map(const TileMap& map, Device device);

// out = softmax(scale q k^T masked) v and its lse. `map` has the forward tile shape.
void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                             const DeviceTileMap& map, double scale, const Tensor& out,
                             const Tensor& lse, cudaStream_t stream);

// dq, dk, dv of the forward above, given its out and lse. `map` has the backward tile shape.
// Default: a key-tile-major kernel computes dK/dV (looping over the query heads of its kv head)
// and adds dQ with fp32 atomics (summation order varies from run to run). deterministic = true
// computes dQ in a second, query-tile-major kernel instead: bitwise reproducible, ~40% more math.
void flash_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse, const Tensor& dout,
                              const DeviceTileMap& map, double scale, const Tensor& dq,
                              const Tensor& dk, const Tensor& dv, cudaStream_t stream,
                              bool deterministic = false);

}  // namespace sprig::cuda
