// Launch planning of the flash-attention kernels, shared by the host code (flash_host.cpp, built
// with or without CUDA) and the kernels (flash_fwd.cu, flash_bwd.cu): the kernel configurations,
// the CTA -> work decode, the packing of tile lists, grid sizes and the launchers' argument checks.
// The constexpr functions also run on the device (the CUDA build uses --expt-relaxed-constexpr).
#pragma once

#include <cstdint>
#include <vector>

#include "attention/cuda/flash.h"

namespace sprig::cuda::detail {

// One kernel configuration: a block_m x block_n tile (queries x keys) per CTA of `warps` warps.
struct FlashConfig {
  int block_m, block_n, warps;
};

// Forward: 4 warps of 32 whole query rows each (docs/kernels.md §4.1). Backward (dK/dV, and dQ with
// atomics): 8 warps of 16 keys each. The deterministic dQ kernel runs the backward tile with one
// warp per 16 query rows. head_dim must be 64 or 128 (flash_tile_shape checks it).
constexpr FlashConfig flash_config(FlashPass pass, int head_dim) {
  if (pass == FlashPass::forward)
    return head_dim == 64 ? FlashConfig{128, 128, 4} : FlashConfig{128, 64, 4};
  return head_dim == 64 ? FlashConfig{128, 128, 8} : FlashConfig{64, 128, 8};
}

// CTA `linear` of a grid of heads * batch * lines CTAs: the head varies fastest (the query heads
// of one kv head run side by side and share its K/V in L2), then the batch row, then `rank`, the
// position in the map's LPT order (rank 0: the line with the most entries).
struct WorkItem {
  int head, batch, rank;
};
constexpr WorkItem work_item(int linear, int heads, int batch) {
  return {linear % heads, linear / heads % batch, linear / heads / batch};
}

// The map row of batch row b: b, or 0 for a map shared by all rows.
constexpr int map_row(int batch_row, int map_rows) { return map_rows == 1 ? 0 : batch_row; }

// Blocks for heads * batch * lines CTAs; throws "[op] ..." beyond the grid's int range.
unsigned flash_grid_size(const char* op, int64_t heads, int64_t batch, int64_t lines);

// The device layout of a list's entries: (start, mask_idx) pairs, mask_idx -1 for full tiles.
// Throws "[upload_tile_map] ..." when a line has a partial entry after a full one, or when an
// entry's kind and mask_idx disagree.
std::vector<int32_t> pack_tile_entries(const TileList& list);

// Argument checks of the launchers (throw std::invalid_argument "[op] ..."): dtypes, shapes,
// head dim, GQA ratio, contiguity and 16-byte alignment, the map's shape and tile shape, the
// scale, and last that every tensor lives on one CUDA device.
void check_flash_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                         const DeviceTileMap& map, double scale, const Tensor& out,
                         const Tensor& lse);
void check_flash_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const Tensor& lse, const Tensor& dout, const DeviceTileMap& map,
                          double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv);

}  // namespace sprig::cuda::detail
