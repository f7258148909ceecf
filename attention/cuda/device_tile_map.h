// Tile maps on the device (host side, built with or without CUDA): the tile shape each pass of the
// CUDA flash kernels needs, and the upload of a TileMap (attention/tile_map.h) into i32/i64
// tensors the kernels read (docs/kernels.md).
#pragma once

#include <cstdint>

#include "attention/tile_map.h"
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
  Tensor ptr;      // [num_rows * lines_per_row + 1]
  Tensor entries;  // [entries, 2]: (start, mask_idx), mask_idx -1 for a full tile
  Tensor order;    // [num_rows * lines_per_row]: the LPT order of the lines of each mask row
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

}  // namespace sprig::cuda
