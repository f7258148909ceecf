// Mask compilation: per-row key intervals (stage A) and the block-sparse tile map with partial
// keep bits, its transpose and LPT orders (stage B). See tile_map.h and docs/kernels.md §2.
#include "attention/tile_map.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "tensor/ops/dispatch.h"

namespace sprig {

using detail::fail;

int64_t RowIntervals::allowed_elements() const {
  int64_t n = 0;
  for (size_t i = 0; i < bounds.size(); i += 2) n += bounds[i + 1] - bounds[i];
  return n;
}

RowIntervals row_intervals(const BatchMask& mask) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (mask.q_len() >= kMax || mask.k_len() >= kMax || mask.num_rows() * mask.q_len() >= kMax)
    fail("tile_map", "mask shape [" + std::to_string(mask.q_len()) + ", " +
                         std::to_string(mask.k_len()) + "] with " +
                         std::to_string(mask.num_rows()) + " rows exceeds int32 indexing");
  RowIntervals out;
  out.num_rows = static_cast<int32_t>(mask.num_rows());
  out.q_len = static_cast<int32_t>(mask.q_len());
  out.k_len = static_cast<int32_t>(mask.k_len());
  out.row_ptr.assign(1, 0);
  std::vector<std::vector<std::pair<int32_t, int32_t>>> spans(out.q_len);
  for (int32_t r = 0; r < out.num_rows; ++r) {
    for (auto& s : spans) s.clear();
    for (const Rect& rect : mask.row(r).rects)
      for (int64_t q = rect.q0; q < rect.q1; ++q) {
        const auto [lo, hi] = rect.key_span(q);
        if (lo < hi) spans[q].emplace_back(static_cast<int32_t>(lo), static_cast<int32_t>(hi));
      }
    for (auto& s : spans) {  // sort, then merge overlapping or touching spans
      std::sort(s.begin(), s.end());
      for (size_t i = 0; i < s.size(); ++i) {
        const size_t n = out.bounds.size();
        const bool extends =
            n > 2 * static_cast<size_t>(out.row_ptr.back()) && s[i].first <= out.bounds[n - 1];
        if (extends)
          out.bounds[n - 1] = std::max(out.bounds[n - 1], s[i].second);
        else
          out.bounds.insert(out.bounds.end(), {s[i].first, s[i].second});
      }
      out.row_ptr.push_back(static_cast<int32_t>(out.bounds.size() / 2));
    }
  }
  return out;
}

namespace {

// Sets bits [lo, hi) of a bit array stored in 64-bit words.
void set_bits(uint64_t* words, int32_t lo, int32_t hi) {
  for (int32_t b = lo; b < hi;) {
    const int32_t w = b / 64, first = b % 64, count = std::min(64 - first, hi - b);
    const uint64_t ones = count == 64 ? ~uint64_t{0} : ((uint64_t{1} << count) - 1);
    words[w] |= ones << first;
    b += count;
  }
}

// Per mask row, the line indices of `list` stable-sorted by entry count descending.
std::vector<int32_t> lpt_order(const TileList& list, int32_t num_rows, int32_t lines_per_row) {
  std::vector<int32_t> order(static_cast<size_t>(num_rows) * lines_per_row);
  for (int32_t r = 0; r < num_rows; ++r) {
    const auto first = order.begin() + static_cast<int64_t>(r) * lines_per_row;
    const int64_t base = static_cast<int64_t>(r) * lines_per_row;
    std::iota(first, first + lines_per_row, 0);
    std::stable_sort(first, first + lines_per_row, [&](int32_t a, int32_t b) {
      return list.count(base + a) > list.count(base + b);
    });
  }
  return order;
}

void push_entry(TileList& list, int32_t start, TileKind kind, int32_t mask_idx) {
  list.start.push_back(start);
  list.kind.push_back(static_cast<int32_t>(kind));
  list.mask_idx.push_back(mask_idx);
}

// Classifies the key tiles of query tile t of mask row r (difference arrays over key tiles) and
// appends its entries and the bits of its partial tiles to `map`.
void classify_query_tile(const RowIntervals& iv, int32_t r, int32_t t, TileMap& map,
                         std::vector<int32_t>& full, std::vector<int32_t>& touch) {
  const int32_t bm = map.block_m, bn = map.block_n;
  const int32_t q0 = t * bm, rows = std::min(bm, iv.q_len - q0);
  std::fill(full.begin(), full.end(), 0);
  std::fill(touch.begin(), touch.end(), 0);
  const int64_t row_base = static_cast<int64_t>(r) * iv.q_len + q0;
  for (int32_t i = iv.row_ptr[row_base]; i < iv.row_ptr[row_base + rows]; ++i) {
    const int32_t a = iv.bounds[2 * i], b = iv.bounds[2 * i + 1];
    ++touch[a / bn], --touch[(b - 1) / bn + 1];
    const int32_t f0 = (a + bn - 1) / bn, f1 = b / bn;  // tiles entirely inside [a, b)
    if (f0 < f1) ++full[f0], --full[f1];
  }
  std::vector<int32_t> full_tiles;
  for (int32_t j = 0, f = 0, h = 0; j < map.num_k_tiles; ++j) {
    f += full[j], h += touch[j];
    if (f == rows)
      full_tiles.push_back(j);
    else if (h > 0) {  // partial: record its keep bits
      const int32_t p =
          static_cast<int32_t>(map.bits.size() / (static_cast<size_t>(bm) * map.words_per_row));
      push_entry(map.by_query, j * bn, TileKind::partial, p);
      map.bits.resize(map.bits.size() + static_cast<size_t>(bm) * map.words_per_row, 0);
      for (int32_t row = 0; row < rows; ++row) {
        uint64_t* words = &map.bits[(static_cast<size_t>(p) * bm + row) * map.words_per_row];
        for (int32_t k = iv.row_ptr[row_base + row]; k < iv.row_ptr[row_base + row + 1]; ++k) {
          const int32_t lo = std::max(iv.bounds[2 * k], j * bn) - j * bn;
          const int32_t hi = std::min(iv.bounds[2 * k + 1], (j + 1) * bn) - j * bn;
          if (lo < hi) set_bits(words, lo, hi);
        }
      }
    }
  }
  for (int32_t j : full_tiles) push_entry(map.by_query, j * bn, TileKind::full, -1);
  map.by_query.ptr.push_back(static_cast<int32_t>(map.by_query.start.size()));
}

// by_key from by_query: a counting sort by key tile, partial entries placed before full ones.
void transpose(TileMap& map) {
  const TileList& fwd = map.by_query;
  TileList& bwd = map.by_key;
  const size_t n = fwd.start.size();
  bwd.ptr.assign(static_cast<size_t>(map.num_rows) * map.num_k_tiles + 1, 0);
  bwd.start.resize(n), bwd.kind.resize(n), bwd.mask_idx.resize(n);
  auto key_line = [&](int32_t r, size_t e) {
    return static_cast<size_t>(r) * map.num_k_tiles + fwd.start[e] / map.block_n;
  };
  for (int32_t r = 0; r < map.num_rows; ++r)
    for (int32_t t = 0; t < map.num_q_tiles; ++t) {
      const int64_t line = static_cast<int64_t>(r) * map.num_q_tiles + t;
      for (int32_t e = fwd.ptr[line]; e < fwd.ptr[line + 1]; ++e) ++bwd.ptr[key_line(r, e) + 1];
    }
  std::partial_sum(bwd.ptr.begin(), bwd.ptr.end(), bwd.ptr.begin());
  std::vector<int32_t> cursor(bwd.ptr.begin(), bwd.ptr.end() - 1);
  for (TileKind kind : {TileKind::partial, TileKind::full})
    for (int32_t r = 0; r < map.num_rows; ++r)
      for (int32_t t = 0; t < map.num_q_tiles; ++t) {
        const int64_t line = static_cast<int64_t>(r) * map.num_q_tiles + t;
        for (int32_t e = fwd.ptr[line]; e < fwd.ptr[line + 1]; ++e) {
          if (fwd.kind[e] != static_cast<int32_t>(kind)) continue;
          const int32_t pos = cursor[key_line(r, e)]++;
          bwd.start[pos] = t * map.block_m;
          bwd.kind[pos] = fwd.kind[e];
          bwd.mask_idx[pos] = fwd.mask_idx[e];
        }
      }
}

}  // namespace

TileMap compile_tile_map(const RowIntervals& iv, int32_t block_m, int32_t block_n) {
  if (block_m < 1 || block_n < 1)
    fail("tile_map", "tile shape must be positive, got " + std::to_string(block_m) + " x " +
                         std::to_string(block_n));
  TileMap map;
  map.num_rows = iv.num_rows, map.q_len = iv.q_len, map.k_len = iv.k_len;
  map.block_m = block_m, map.block_n = block_n;
  map.num_q_tiles = (iv.q_len + block_m - 1) / block_m;
  map.num_k_tiles = (iv.k_len + block_n - 1) / block_n;
  map.words_per_row = (block_n + 63) / 64;
  map.by_query.ptr.assign(1, 0);
  std::vector<int32_t> full(map.num_k_tiles + 1), touch(map.num_k_tiles + 1);
  for (int32_t r = 0; r < iv.num_rows; ++r)
    for (int32_t t = 0; t < map.num_q_tiles; ++t) classify_query_tile(iv, r, t, map, full, touch);
  transpose(map);
  map.q_order = lpt_order(map.by_query, map.num_rows, map.num_q_tiles);
  map.k_order = lpt_order(map.by_key, map.num_rows, map.num_k_tiles);
  map.allowed_elements = iv.allowed_elements();
  map.visited_elements = static_cast<int64_t>(map.by_query.start.size()) * block_m * block_n;
  return map;
}

}  // namespace sprig
