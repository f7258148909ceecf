// Mask compilation: row intervals and tile maps checked exactly against the dense mask for every
// mask kind at awkward lengths and tile shapes, plus hand-computed small maps.
#include "attention/tile_map.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "tests/attention/mask_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

constexpr int32_t kPartial = static_cast<int32_t>(TileKind::partial);
constexpr int32_t kFull = static_cast<int32_t>(TileKind::full);

// Row intervals are sorted, disjoint, separated by a gap (merged), and cover exactly the
// allowed keys of each row.
void check_intervals(const RowIntervals& iv, const std::vector<std::vector<int32_t>>& dense) {
  ASSERT_EQ(iv.row_ptr.size(), static_cast<size_t>(iv.num_rows) * iv.q_len + 1);
  int64_t allowed = 0;
  for (int64_t row = 0; row < static_cast<int64_t>(iv.num_rows) * iv.q_len; ++row) {
    std::vector<int32_t> covered(iv.k_len, 0);
    for (int32_t i = iv.row_ptr[row]; i < iv.row_ptr[row + 1]; ++i) {
      const int32_t a = iv.bounds[2 * i], b = iv.bounds[2 * i + 1];
      ASSERT_LT(a, b);
      if (i > iv.row_ptr[row]) {
        ASSERT_LT(iv.bounds[2 * i - 1], a) << "not merged, row " << row;
      }
      for (int32_t k = a; k < b; ++k) covered[k] = 1;
    }
    const int64_t r = row / iv.q_len, q = row % iv.q_len;
    for (int32_t k = 0; k < iv.k_len; ++k) {
      ASSERT_EQ(covered[k], dense[r][q * iv.k_len + k]) << "row " << row << " key " << k;
      allowed += covered[k];
    }
  }
  EXPECT_EQ(iv.allowed_elements(), allowed);
}

// Every tile classified exactly: absent when it holds no allowed element, full when all its
// valid rows allow all its keys and it lies inside the keys, partial otherwise; partial bits
// equal the dense mask (0 outside the valid rows and keys); the transpose lists the same entries;
// LPT orders are count-sorted permutations; stats add up.
void check_tile_map(const TileMap& map, const std::vector<std::vector<int32_t>>& dense) {
  const int32_t bm = map.block_m, bn = map.block_n;
  using Entry = std::tuple<int32_t, int32_t, int32_t, int32_t, int32_t>;  // r, t, j, kind, mask
  std::set<Entry> forward, backward;
  int64_t allowed = 0;
  for (int32_t r = 0; r < map.num_rows; ++r)
    for (int32_t t = 0; t < map.num_q_tiles; ++t) {
      const int64_t line = static_cast<int64_t>(r) * map.num_q_tiles + t;
      std::map<int32_t, std::pair<int32_t, int32_t>> listed;  // key tile -> (kind, mask)
      int32_t previous_kind = kPartial, previous_j = -1;
      for (int32_t e = map.by_query.ptr[line]; e < map.by_query.ptr[line + 1]; ++e) {
        const int32_t j = map.by_query.start[e] / bn, kind = map.by_query.kind[e];
        ASSERT_EQ(map.by_query.start[e] % bn, 0);
        ASSERT_TRUE(kind > previous_kind || (kind == previous_kind && j > previous_j))
            << "entries not partial-first ascending";
        previous_kind = kind, previous_j = j;
        listed[j] = {kind, map.by_query.mask_idx[e]};
        forward.insert({r, t, j, kind, map.by_query.mask_idx[e]});
      }
      for (int32_t j = 0; j < map.num_k_tiles; ++j) {
        int64_t count = 0;
        const int32_t rows = std::min(bm, map.q_len - t * bm);
        for (int32_t i = 0; i < rows; ++i)
          for (int32_t c = 0; c < bn && j * bn + c < map.k_len; ++c)
            count += dense[r][static_cast<int64_t>(t * bm + i) * map.k_len + j * bn + c];
        allowed += count;
        const auto it = listed.find(j);
        if (count == 0) {
          ASSERT_TRUE(it == listed.end())
              << "empty tile listed: r " << r << " t " << t << " j " << j;
          continue;
        }
        ASSERT_TRUE(it != listed.end()) << "tile missing: r " << r << " t " << t << " j " << j;
        const bool full = count == static_cast<int64_t>(rows) * bn;
        ASSERT_EQ(it->second.first, full ? kFull : kPartial)
            << "r " << r << " t " << t << " j " << j;
        if (full) {
          ASSERT_EQ(it->second.second, -1);
          continue;
        }
        for (int32_t i = 0; i < bm; ++i)
          for (int32_t c = 0; c < bn; ++c) {
            const int64_t q = t * bm + i, k = j * bn + c;
            const bool expected = q < map.q_len && k < map.k_len && dense[r][q * map.k_len + k];
            ASSERT_EQ(map.allowed_in_partial(it->second.second, i, c), expected)
                << "bit r " << r << " q " << q << " k " << k;
          }
      }
    }
  for (int32_t r = 0; r < map.num_rows; ++r)
    for (int32_t j = 0; j < map.num_k_tiles; ++j) {
      const int64_t line = static_cast<int64_t>(r) * map.num_k_tiles + j;
      int32_t previous_kind = kPartial, previous_t = -1;
      for (int32_t e = map.by_key.ptr[line]; e < map.by_key.ptr[line + 1]; ++e) {
        const int32_t t = map.by_key.start[e] / bm, kind = map.by_key.kind[e];
        ASSERT_TRUE(kind > previous_kind || (kind == previous_kind && t > previous_t));
        previous_kind = kind, previous_t = t;
        backward.insert({r, t, j, kind, map.by_key.mask_idx[e]});
      }
    }
  EXPECT_EQ(forward, backward);
  EXPECT_EQ(map.by_key.start.size(), map.by_query.start.size());
  for (auto [order, list, lines] : {std::tuple{&map.q_order, &map.by_query, map.num_q_tiles},
                                    std::tuple{&map.k_order, &map.by_key, map.num_k_tiles}}) {
    ASSERT_EQ(order->size(), static_cast<size_t>(map.num_rows) * lines);
    for (int32_t r = 0; r < map.num_rows; ++r) {
      const auto first = order->begin() + static_cast<int64_t>(r) * lines;
      std::vector<int32_t> sorted(first, first + lines);
      std::sort(sorted.begin(), sorted.end());
      for (int32_t i = 0; i < lines; ++i) ASSERT_EQ(sorted[i], i) << "not a permutation";
      for (int32_t i = 1; i < lines; ++i)
        ASSERT_GE(list->count(static_cast<int64_t>(r) * lines + first[i - 1]),
                  list->count(static_cast<int64_t>(r) * lines + first[i]));
    }
  }
  EXPECT_EQ(map.allowed_elements, allowed);
  EXPECT_EQ(map.visited_elements, static_cast<int64_t>(map.by_query.start.size()) * bm * bn);
}

std::vector<std::vector<int32_t>> dense_of(const BatchMask& m) {
  std::vector<std::vector<int32_t>> rows;
  for (int64_t r = 0; r < m.num_rows(); ++r) rows.push_back(m.row(r).dense().to_vector<int32_t>());
  return rows;
}

// The keep-bit words as ints. (GCC 12.2 with -march=native miscompiles the literal
// std::vector<uint64_t>{1, 1, 1, 0} into four ones, so the tests spell expected words as int.)
std::vector<int> bit_words(const TileMap& map) {
  return std::vector<int>(map.bits.begin(), map.bits.end());
}

TEST(TileMap, EveryKindEveryShapeMatchesDense) {
  std::mt19937 rng(3);
  for (testing::MaskKind kind : testing::kAllMaskKinds)
    for (int64_t t : {1, 17, 97, 1025}) {
      // Two batch rows with different masks of the kind, then one mask shared by the batch.
      const BatchMask batch(
          {testing::random_mask(kind, t, rng), testing::random_mask(kind, t, rng)});
      const RowIntervals iv = row_intervals(batch);
      const auto dense = dense_of(batch);
      SCOPED_TRACE(std::string(testing::mask_kind_name(kind)) + " T " + std::to_string(t));
      check_intervals(iv, dense);
      for (int32_t bm : {64, 128})
        for (int32_t bn : {64, 128}) {
          SCOPED_TRACE("tile " + std::to_string(bm) + "x" + std::to_string(bn));
          check_tile_map(compile_tile_map(iv, bm, bn), dense);
        }
      const BatchMask shared(batch.row(0));
      check_tile_map(compile_tile_map(row_intervals(shared), 64, 64), dense_of(shared));
    }
}

TEST(TileMap, OddTileShapes) {
  // Tiles of 16 rows (GQA-packed DFlash blocks), 1 row and 100 keys (two bit words, the second
  // partly used).
  std::mt19937 rng(5);
  for (testing::MaskKind kind : testing::kAllMaskKinds) {
    const BatchMask m(testing::random_mask(kind, 97, rng));
    for (auto [bm, bn] : {std::pair{16, 64}, {1, 100}, {48, 16}}) {
      SCOPED_TRACE(std::string(testing::mask_kind_name(kind)) + " tile " + std::to_string(bm) +
                   "x" + std::to_string(bn));
      check_tile_map(compile_tile_map(row_intervals(m), bm, bn), dense_of(m));
    }
  }
}

TEST(TileMap, CausalByHand) {
  // causal(4) in 2x2 tiles: (0,0) partial, (1,0) full, (1,1) partial, (0,1) empty.
  const TileMap map = compile_tile_map(row_intervals(BatchMask(causal_mask(4))), 2, 2);
  EXPECT_EQ(map.by_query.ptr, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(map.by_query.start, (std::vector<int32_t>{0, 2, 0}));
  EXPECT_EQ(map.by_query.kind, (std::vector<int32_t>{kPartial, kPartial, kFull}));
  EXPECT_EQ(map.by_query.mask_idx, (std::vector<int32_t>{0, 1, -1}));
  EXPECT_EQ(bit_words(map), (std::vector<int>{0b01, 0b11, 0b01, 0b11}));
  // Key tile 0 is seen by query tile 0 (partial) then 1 (full); key tile 1 by query tile 1.
  EXPECT_EQ(map.by_key.ptr, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(map.by_key.start, (std::vector<int32_t>{0, 2, 2}));
  EXPECT_EQ(map.by_key.kind, (std::vector<int32_t>{kPartial, kFull, kPartial}));
  EXPECT_EQ(map.q_order, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(map.k_order, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(map.allowed_elements, 10);
  EXPECT_EQ(map.visited_elements, 12);
  EXPECT_DOUBLE_EQ(map.efficiency(), 10.0 / 12.0);
}

TEST(TileMap, OutOfRangeRowsAndKeys) {
  // A full 3x3 mask in 2x2 tiles: the key tile reaching past k_len is partial (its zero-filled
  // key must be masked), the query tile reaching past q_len ignores its missing row (full).
  const TileMap map = compile_tile_map(row_intervals(BatchMask(Mask{3, 3, {{0, 3, 0, 3}}})), 2, 2);
  EXPECT_EQ(map.by_query.start, (std::vector<int32_t>{2, 0, 2, 0}));
  EXPECT_EQ(map.by_query.kind, (std::vector<int32_t>{kPartial, kFull, kPartial, kFull}));
  EXPECT_EQ(bit_words(map), (std::vector<int>{0b01, 0b01, 0b01, 0b00}));
}

TEST(TileMap, RowIntervalsMergeRectangles) {
  // Overlapping and touching rectangles merge; a window clips the lower edge.
  const Mask m{2,
               10,
               {{0, 2, 0, 3},
                {0, 2, 3, 5},
                {0, 1, 2, 4},
                {0, 2, 7, 9, RectKind::causal},
                {1, 2, 6, 10, RectKind::full, 2, 2}}};
  const RowIntervals iv = row_intervals(BatchMask(m));
  EXPECT_EQ(iv.row_ptr, (std::vector<int32_t>{0, 2, 4}));
  // Row 0: [0, 5) and the causal [7, 8). Row 1: [0, 5), the causal [7, 9) and the window
  // rectangle (row 1 at key position 6 + 2 = 8 sees keys k with 8 - k < 2, up to 10): [7, 10).
  EXPECT_EQ(iv.bounds, (std::vector<int32_t>{0, 5, 7, 8, 0, 5, 7, 10}));
}

TEST(TileMap, BadTileShape) {
  const RowIntervals iv = row_intervals(BatchMask(causal_mask(4)));
  EXPECT_EQ(testing::invalid_argument_message([&] { compile_tile_map(iv, 0, 64); }),
            "[tile_map] tile shape must be positive, got 0 x 64");
}

}  // namespace
}  // namespace sprig
