// Compilation of a batch mask for the tiled attention kernels (docs/kernels.md §2), once per batch
// and shared by every layer and head:
//   stage A: rectangles -> per query row, the sorted, merged, disjoint key intervals;
//   stage B: intervals -> for one tile shape (block_m x block_n), the block-sparse tile map.
// Everything is flat int32 / uint64 vectors so the structure uploads to a GPU as is.
//
// Tile (t, j) covers queries [t*block_m, +block_m) and keys [j*block_n, +block_n) of one mask row
// (rows past q_len are ignored). It is empty (listed nowhere) when no valid row allows any of its
// keys, full when every valid row allows every one of its keys (so a key tile reaching past k_len
// is never full: zero-filled keys must go through the mask), and partial otherwise.
#pragma once

#include <cstdint>
#include <vector>

#include "attention/mask.h"

namespace sprig {

// Stage A. The intervals of query q of mask row r are bounds[2i], bounds[2i+1] (half-open) for
// i in [row_ptr[r*q_len + q], row_ptr[r*q_len + q + 1]).
struct RowIntervals {
  int32_t num_rows = 0, q_len = 0, k_len = 0;  // num_rows: the BatchMask's (1 when shared)
  std::vector<int32_t> row_ptr;                // [num_rows * q_len + 1]
  std::vector<int32_t> bounds;                 // [2 * intervals]

  int64_t allowed_elements() const;  // sum of all interval lengths
};
RowIntervals row_intervals(const BatchMask& mask);

enum class TileKind : int32_t { partial = 0, full = 1 };

// A CSR list of tiles per "line": per query tile (forward and dQ) or per key tile (dK/dV). Line
// (r, t) of mask row r is index r * lines_per_row + t. In each line the partial entries come first,
// then the full ones, each group ascending in the other tile index.
struct TileList {
  std::vector<int32_t> ptr;       // [num_rows * lines_per_row + 1]
  std::vector<int32_t> start;     // per entry: first key (query list) or first query (key list)
  std::vector<int32_t> kind;      // per entry: TileKind
  std::vector<int32_t> mask_idx;  // per entry: partial tile index into TileMap::bits, -1 if full

  int32_t count(int64_t line) const { return ptr[line + 1] - ptr[line]; }
};

struct TileMap {
  int32_t num_rows = 0, q_len = 0, k_len = 0;
  int32_t block_m = 0, block_n = 0, num_q_tiles = 0, num_k_tiles = 0;
  int32_t words_per_row = 0;  // ceil(block_n / 64)
  TileList by_query;          // lines = query tiles
  TileList by_key;            // lines = key tiles (the transpose, for dK/dV)
  // Keep bits of every partial tile p: row i of the tile (query p's start + i), word w holds
  // keys start + 64w .. start + 64w + 63, bit c for key start + 64w + c. Rows past q_len and keys
  // past k_len are 0. Index: (p * block_m + i) * words_per_row + w.
  std::vector<uint64_t> bits;
  // Longest-processing-time orders per mask row: q_order[r * num_q_tiles + i] is the query tile
  // with the i-th most entries (ties by index); k_order likewise for key tiles. Permutations.
  std::vector<int32_t> q_order, k_order;
  int64_t allowed_elements = 0;  // allowed (query, key) pairs, summed over mask rows
  int64_t visited_elements = 0;  // entries * block_m * block_n

  double efficiency() const {  // allowed / visited (1 when nothing is visited)
    return visited_elements ? static_cast<double>(allowed_elements) / visited_elements : 1.0;
  }
  bool allowed_in_partial(int32_t mask_idx, int32_t row, int32_t col) const {
    return (bits[(static_cast<size_t>(mask_idx) * block_m + row) * words_per_row + col / 64] >>
            (col % 64)) &
           1u;
  }
};

// Stage B. block_m, block_n >= 1 (kernels use multiples of 16; bits are packed per 64 keys).
TileMap compile_tile_map(const RowIntervals& intervals, int32_t block_m, int32_t block_n);

}  // namespace sprig
