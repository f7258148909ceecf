// Host side of the CUDA flash attention (CPU): tile shapes and kernel configurations, the CTA ->
// work decode and grid sizes, the packing and upload of tile maps, and the launchers' argument
// checks (run on CPU tensors; the device check comes last).
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "attention/cuda/flash_plan.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using cuda::DeviceTileMap;
using cuda::FlashPass;
using cuda::TileShape;
using testing::invalid_argument_message;

TEST(FlashTiles, TileShapesPerPassAndHeadDim) {
  EXPECT_EQ(cuda::flash_tile_shape(FlashPass::forward, 64), (TileShape{128, 128}));
  EXPECT_EQ(cuda::flash_tile_shape(FlashPass::forward, 128), (TileShape{128, 64}));
  EXPECT_EQ(cuda::flash_tile_shape(FlashPass::backward, 64), (TileShape{128, 128}));
  EXPECT_EQ(cuda::flash_tile_shape(FlashPass::backward, 128), (TileShape{64, 128}));
  EXPECT_EQ(invalid_argument_message([] { cuda::flash_tile_shape(FlashPass::forward, 96); }),
            "[flash_tile_shape] head dim must be 64 or 128, got 96");
}

TEST(FlashTiles, KernelConfigurationsSplitTilesIntoWholeWarpRows) {
  for (int d : {64, 128}) {
    // Forward: 32 query rows per warp; backward: 16 keys per warp, query tiles of whole m16 tiles.
    const auto f = cuda::detail::flash_config(FlashPass::forward, d);
    EXPECT_EQ(f.block_m, 32 * f.warps);
    EXPECT_EQ(f.block_n % 64, 0);  // whole keep-bit words
    const auto b = cuda::detail::flash_config(FlashPass::backward, d);
    EXPECT_EQ(b.block_n, 16 * b.warps);
    EXPECT_EQ(b.block_m % 64, 0);
  }
}

TEST(FlashTiles, WorkItemsCoverTheGridHeadsFirstInRankOrder) {
  const int heads = 3, batch = 2, lines = 4;
  std::set<std::tuple<int, int, int>> seen;
  int last_rank = 0;
  for (int linear = 0; linear < heads * batch * lines; ++linear) {
    const cuda::detail::WorkItem w = cuda::detail::work_item(linear, heads, batch);
    EXPECT_EQ(w.head, linear % heads);  // the query heads of a kv head are adjacent
    EXPECT_GE(w.rank, last_rank);       // largest lines (rank 0) are issued first
    EXPECT_LT(w.batch, batch);
    EXPECT_LT(w.rank, lines);
    last_rank = w.rank;
    seen.insert({w.head, w.batch, w.rank});
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(heads * batch * lines));
  EXPECT_EQ(cuda::detail::map_row(1, 1), 0);  // a shared mask
  EXPECT_EQ(cuda::detail::map_row(1, 2), 1);
}

TEST(FlashTiles, GridSize) {
  EXPECT_EQ(cuda::detail::flash_grid_size("op", 8, 2, 9), 144u);
  EXPECT_EQ(cuda::detail::flash_grid_size("op", 8, 2, 0), 0u);
  EXPECT_EQ(invalid_argument_message([] { cuda::detail::flash_grid_size("op", 1024, 4096, 1024); }),
            "[op] 1024 heads x 4096 batch rows x 1024 tiles exceed the grid limit");
}

TileMap causal_map(int64_t t, TileShape shape) {
  return compile_tile_map(row_intervals(BatchMask(causal_mask(t))), shape.block_m, shape.block_n);
}

TEST(FlashTiles, PackedEntriesAreStartAndMaskIndexWithMinusOneForFullTiles) {
  const TileMap map = causal_map(300, {128, 64});
  const std::vector<int32_t> packed = cuda::detail::pack_tile_entries(map.by_query);
  ASSERT_EQ(packed.size(), 2 * map.by_query.start.size());
  int full = 0;
  for (size_t e = 0; e < map.by_query.start.size(); ++e) {
    EXPECT_EQ(packed[2 * e], map.by_query.start[e]);
    EXPECT_EQ(packed[2 * e + 1], map.by_query.mask_idx[e]);
    const bool is_full = map.by_query.kind[e] == static_cast<int32_t>(TileKind::full);
    EXPECT_EQ(packed[2 * e + 1] < 0, is_full);
    full += is_full;
  }
  // Query tile 0 (rows 0-127): key tiles 0, 1 partial (row 0 sees key 0 only). Query tile 1:
  // key tiles 0, 1 full, 2, 3 partial. Query tile 2 (rows 256-299): 0-3 full, 4 partial (it
  // reaches past the last key).
  EXPECT_EQ(full, 6);
  EXPECT_EQ((std::vector<int32_t>(packed.begin(), packed.begin() + 4)),
            (std::vector<int32_t>{0, 0, 64, 1}));
}

TEST(FlashTiles, PackingRejectsListsTheKernelsCannotWalk) {
  TileList list;
  list.ptr = {0, 2};
  list.start = {0, 64};
  list.kind = {static_cast<int32_t>(TileKind::full), static_cast<int32_t>(TileKind::partial)};
  list.mask_idx = {-1, 0};
  EXPECT_EQ(invalid_argument_message([&] { cuda::detail::pack_tile_entries(list); }),
            "[upload_tile_map] line 0 lists a partial tile after a full one (entry 1)");
  list.kind = {static_cast<int32_t>(TileKind::partial), static_cast<int32_t>(TileKind::full)};
  list.mask_idx = {0, 3};
  EXPECT_EQ(invalid_argument_message([&] { cuda::detail::pack_tile_entries(list); }),
            "[upload_tile_map] entry 1 has kind 1 but mask_idx 3");
}

TEST(FlashTiles, UploadKeepsEveryArrayAndTheBitsExactly) {
  const TileMap map = causal_map(200, {64, 128});
  const DeviceTileMap d = cuda::upload_tile_map(map, Device::cpu());
  EXPECT_EQ(std::tie(d.num_rows, d.q_len, d.k_len, d.block_m, d.block_n, d.num_q_tiles,
                     d.num_k_tiles, d.words_per_row),
            std::tie(map.num_rows, map.q_len, map.k_len, map.block_m, map.block_n, map.num_q_tiles,
                     map.num_k_tiles, map.words_per_row));
  EXPECT_EQ(d.by_query.ptr.to_vector<int32_t>(), map.by_query.ptr);
  EXPECT_EQ(d.by_key.ptr.to_vector<int32_t>(), map.by_key.ptr);
  EXPECT_EQ(d.by_query.entries.to_vector<int32_t>(), cuda::detail::pack_tile_entries(map.by_query));
  EXPECT_EQ(d.by_key.entries.to_vector<int32_t>(), cuda::detail::pack_tile_entries(map.by_key));
  const auto entries = static_cast<int64_t>(map.by_query.start.size());
  EXPECT_EQ(d.by_query.entries.shape(), (Shape{entries, 2}));
  EXPECT_EQ(d.by_query.order.to_vector<int32_t>(), map.q_order);
  EXPECT_EQ(d.by_key.order.to_vector<int32_t>(), map.k_order);
  ASSERT_EQ(d.bits.dtype(), DType::i64);
  const std::vector<int64_t> bits = d.bits.to_vector<int64_t>();
  ASSERT_EQ(bits.size(), map.bits.size());
  ASSERT_FALSE(bits.empty());
  for (size_t i = 0; i < bits.size(); ++i) EXPECT_EQ(static_cast<uint64_t>(bits[i]), map.bits[i]);
  EXPECT_TRUE(d.device() == Device::cpu());
}

// Forward and backward arguments of a valid problem (on the CPU), to break one at a time.
struct Args {
  int64_t b = 2, tq = 17, tk = 17, hq = 4, hkv = 2, d = 64;
  DType dtype = DType::bf16;
  Tensor q = Tensor::zeros({b, tq, hq, d}, dtype), k = Tensor::zeros({b, tk, hkv, d}, dtype),
         v = k.clone(), out = q.clone(), lse = Tensor::zeros({b, hq, tq}), dout = q.clone(),
         dq = q.clone(), dk = k.clone(), dv = k.clone();
  DeviceTileMap fwd = cuda::upload_tile_map(causal_map(17, {128, 128}), Device::cpu());
  DeviceTileMap bwd = fwd;  // the same tile shape at head dim 64
  double scale = 0.125;

  std::string forward() const {
    return invalid_argument_message(
        [&] { cuda::detail::check_flash_forward(q, k, v, fwd, scale, out, lse); });
  }
  std::string backward() const {
    return invalid_argument_message([&] {
      cuda::detail::check_flash_backward(q, k, v, out, lse, dout, bwd, scale, dq, dk, dv);
    });
  }
};

TEST(FlashTiles, ArgumentChecks) {
  const std::string fwd = "[flash_attention_forward] ", bwd = "[flash_attention_backward] ";
  // Everything but the device is valid.
  EXPECT_EQ(Args{}.forward(), fwd + "tensors must be on a CUDA device, got cpu");
  EXPECT_EQ(Args{}.backward(), bwd + "tensors must be on a CUDA device, got cpu");
  Args a;
  a.q = Tensor::zeros({2, 17, 4, 64});
  EXPECT_EQ(a.forward(), fwd + "q must be bf16 or f16, got f32");
  a = Args{};
  a.v = Tensor::zeros({2, 17, 2, 64}, DType::f16);
  EXPECT_EQ(a.forward(), fwd + "v must be bf16, got f16");
  a = Args{};
  a.k = Tensor::zeros({2, 17, 2, 32}, DType::bf16);
  EXPECT_EQ(a.forward(), fwd + "k must have shape [2, 17, 2, 64], got [2, 17, 2, 32]");
  a = Args{};
  a.q = Tensor::zeros({2, 17, 4}, DType::bf16);
  EXPECT_EQ(a.forward(), fwd + "q must have 4 dimensions, got 3 (shape [2, 17, 4])");
  a = Args{};
  a.q = Tensor::zeros({2, 17, 4, 96}, DType::bf16);
  a.k = a.v = Tensor::zeros({2, 17, 2, 96}, DType::bf16);
  a.out = a.q;
  EXPECT_EQ(a.forward(), fwd + "head dim must be 64 or 128, got 96");
  a = Args{};
  a.q = a.out = Tensor::zeros({2, 17, 3, 64}, DType::bf16);
  a.lse = Tensor::zeros({2, 3, 17});
  EXPECT_EQ(a.forward(), fwd + "3 query heads are not a multiple of 2 kv heads");
  a = Args{};
  a.lse = Tensor::zeros({2, 17, 4});
  EXPECT_EQ(a.forward(), fwd + "lse must have shape [2, 4, 17], got [2, 17, 4]");
  a = Args{};
  a.out = Tensor::zeros({17, 2, 4, 64}, DType::bf16).transpose(0, 1);
  EXPECT_EQ(a.forward(), fwd + "out must be contiguous");
  a = Args{};
  a.k = Tensor::zeros({2 * 17 * 2 * 64 + 1}, DType::bf16)
            .narrow(0, 1, 2 * 17 * 2 * 64)
            .view({2, 17, 2, 64});
  EXPECT_EQ(a.forward(), fwd + "k must be 16-byte aligned");
  a = Args{};
  a.fwd = cuda::upload_tile_map(causal_map(16, {128, 128}), Device::cpu());
  EXPECT_EQ(a.forward(), fwd + "tile map is for 16 queries x 16 keys, inputs have 17 x 17");
  a = Args{};
  a.fwd = cuda::upload_tile_map(causal_map(17, {128, 64}), Device::cpu());
  EXPECT_EQ(a.forward(), fwd + "tile map has 128 x 64 tiles, head dim 64 needs 128 x 128");
  a = Args{};
  a.fwd = cuda::upload_tile_map(
      compile_tile_map(
          row_intervals(BatchMask({causal_mask(17), causal_mask(17), causal_mask(17)})), 128, 128),
      Device::cpu());
  EXPECT_EQ(a.forward(),
            fwd + "tile map has 3 mask rows for a batch of 2 (need 1 or the batch size)");
  a = Args{};
  a.fwd = DeviceTileMap{};
  EXPECT_EQ(a.forward(), fwd + "tile map is not uploaded");
  a = Args{};
  a.scale = 0;
  EXPECT_EQ(a.forward(), fwd + "scale must be positive and finite, got 0.000000");
  a = Args{};
  a.dk = Tensor::zeros({2, 17, 4, 64}, DType::bf16);
  EXPECT_EQ(a.backward(), bwd + "dk must have shape [2, 17, 2, 64], got [2, 17, 4, 64]");
  a = Args{};
  a.dout = Tensor::zeros({2, 17, 4, 64});
  EXPECT_EQ(a.backward(), bwd + "dout must be bf16, got f32");
  a = Args{};
  a.dq = Tensor::zeros({17, 2, 4, 64}, DType::bf16).transpose(0, 1);
  EXPECT_EQ(a.backward(), bwd + "dq must be contiguous");
  a = Args{};
  a.q = a.out = a.dout = a.dq = Tensor::zeros({2, 17, 4, 128}, DType::bf16);
  a.k = a.v = a.dk = a.dv = Tensor::zeros({2, 17, 2, 128}, DType::bf16);
  EXPECT_EQ(a.backward(), bwd + "tile map has 128 x 128 tiles, head dim 128 needs 64 x 128");
}

}  // namespace
}  // namespace sprig
