// Host side of the CUDA flash attention, built with or without CUDA: tile shapes, the upload of
// tile maps, grid sizes and the launchers' argument checks (flash.h, flash_plan.h).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "attention/cuda/flash_plan.h"
#include "tensor/ops/dispatch.h"

namespace sprig::cuda {

using sprig::detail::fail;

TileShape flash_tile_shape(FlashPass pass, int64_t head_dim) {
  if (head_dim != 64 && head_dim != 128)
    fail("flash_tile_shape", "head dim must be 64 or 128, got " + std::to_string(head_dim));
  const detail::FlashConfig c = detail::flash_config(pass, static_cast<int>(head_dim));
  return {c.block_m, c.block_n};
}

namespace {

DeviceTileList upload_list(const TileList& list, const std::vector<int32_t>& order, Device device) {
  const std::vector<int32_t> entries = detail::pack_tile_entries(list);
  const auto n = static_cast<int64_t>(list.start.size());
  return {Tensor::from_vector(list.ptr, {static_cast<int64_t>(list.ptr.size())}, device),
          Tensor::from_vector(entries, {n, 2}, device),
          Tensor::from_vector(order, {static_cast<int64_t>(order.size())}, device)};
}

}  // namespace

DeviceTileMap upload_tile_map(const TileMap& map, Device device) {
  DeviceTileMap d;
  d.num_rows = map.num_rows, d.q_len = map.q_len, d.k_len = map.k_len;
  d.block_m = map.block_m, d.block_n = map.block_n;
  d.num_q_tiles = map.num_q_tiles, d.num_k_tiles = map.num_k_tiles;
  d.words_per_row = map.words_per_row;
  d.by_query = upload_list(map.by_query, map.q_order, device);
  d.by_key = upload_list(map.by_key, map.k_order, device);
  Tensor bits = Tensor::empty({static_cast<int64_t>(map.bits.size())}, DType::i64);
  if (!map.bits.empty()) std::memcpy(bits.data_ptr(), map.bits.data(), bits.nbytes());
  d.bits = bits.to(device);
  return d;
}

namespace detail {

unsigned flash_grid_size(const char* op, int64_t heads, int64_t batch, int64_t lines) {
  const int64_t n = heads * batch * lines;
  if (n > std::numeric_limits<int32_t>::max())
    fail(op, std::to_string(heads) + " heads x " + std::to_string(batch) + " batch rows x " +
                 std::to_string(lines) + " tiles exceed the grid limit");
  return static_cast<unsigned>(n);
}

std::vector<int32_t> pack_tile_entries(const TileList& list) {
  std::vector<int32_t> packed(2 * list.start.size());
  for (size_t line = 0; line + 1 < list.ptr.size(); ++line) {
    bool seen_full = false;
    for (int32_t e = list.ptr[line]; e < list.ptr[line + 1]; ++e) {
      const bool full = list.kind[e] == static_cast<int32_t>(TileKind::full);
      if (full != (list.mask_idx[e] < 0))
        fail("upload_tile_map", "entry " + std::to_string(e) + " has kind " +
                                    std::to_string(list.kind[e]) + " but mask_idx " +
                                    std::to_string(list.mask_idx[e]));
      if (seen_full && !full)
        fail("upload_tile_map", "line " + std::to_string(line) +
                                    " lists a partial tile after a full one (entry " +
                                    std::to_string(e) + ")");
      seen_full = full;
      packed[2 * e] = list.start[e];
      packed[2 * e + 1] = list.mask_idx[e];
    }
  }
  return packed;
}

namespace {

// t is defined, of dtype `dtype` and shape `shape`.
void check_tensor(const char* op, const Tensor& t, const char* name, const Shape& shape,
                  DType dtype) {
  sprig::detail::check_defined(op, t, name);
  if (t.dtype() != dtype)
    fail(op,
         std::string(name) + " must be " + dtype_name(dtype) + ", got " + dtype_name(t.dtype()));
  sprig::detail::check_shape(op, t, shape, name);
}

// q [B, Tq, Hq, D] bf16/f16, k and v [B, Tk, Hkv, D] of q's dtype, D 64/128, Hq % Hkv == 0.
void check_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  for (auto [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}}) {
    sprig::detail::check_defined(op, *t, name);
    sprig::detail::check_dim(op, *t, 4, name);
  }
  if (q.dtype() != DType::bf16 && q.dtype() != DType::f16)
    fail(op, std::string("q must be bf16 or f16, got ") + dtype_name(q.dtype()));
  const int64_t hkv = k.size(2), d = q.size(3);
  check_tensor(op, k, "k", {q.size(0), k.size(1), hkv, d}, q.dtype());
  check_tensor(op, v, "v", k.shape(), q.dtype());
  if (d != 64 && d != 128) fail(op, "head dim must be 64 or 128, got " + std::to_string(d));
  if (hkv == 0 || q.size(2) % hkv != 0)
    fail(op, std::to_string(q.size(2)) + " query heads are not a multiple of " +
                 std::to_string(hkv) + " kv heads");
}

using NamedTensors = std::initializer_list<std::pair<const Tensor*, const char*>>;

// Contiguous; 16-bit tensors 16-byte aligned too (the kernels move them in 16-byte chunks).
void check_layout(const char* op, NamedTensors ts) {
  for (auto [t, name] : ts) {
    if (!t->is_contiguous()) fail(op, std::string(name) + " must be contiguous");
    if (dtype_size(t->dtype()) == 2 && reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 != 0)
      fail(op, std::string(name) + " must be 16-byte aligned");
  }
}

void check_map(const char* op, const DeviceTileMap& map, FlashPass pass, const Tensor& q,
               const Tensor& k) {
  if (!map.bits.defined()) fail(op, "tile map is not uploaded");
  if (map.q_len != q.size(1) || map.k_len != k.size(1))
    fail(op, "tile map is for " + std::to_string(map.q_len) + " queries x " +
                 std::to_string(map.k_len) + " keys, inputs have " + std::to_string(q.size(1)) +
                 " x " + std::to_string(k.size(1)));
  if (map.num_rows != 1 && map.num_rows != q.size(0))
    fail(op, "tile map has " + std::to_string(map.num_rows) + " mask rows for a batch of " +
                 std::to_string(q.size(0)) + " (need 1 or the batch size)");
  const TileShape need = flash_tile_shape(pass, q.size(3));
  if (map.block_m != need.block_m || map.block_n != need.block_n)
    fail(op, "tile map has " + std::to_string(map.block_m) + " x " + std::to_string(map.block_n) +
                 " tiles, head dim " + std::to_string(q.size(3)) + " needs " +
                 std::to_string(need.block_m) + " x " + std::to_string(need.block_n));
}

void check_scale(const char* op, double scale) {
  if (!(std::isfinite(scale) && scale > 0))
    fail(op, "scale must be positive and finite, got " + std::to_string(scale));
}

void check_devices(const char* op, const DeviceTileMap& map, NamedTensors ts) {
  const Device dev = ts.begin()->first->device();
  if (!dev.is_cuda()) fail(op, "tensors must be on a CUDA device, got " + dev.str());
  for (auto [t, name] : ts)
    if (t->device() != dev)
      fail(op, std::string(name) + " is on " + t->device().str() + ", q on " + dev.str());
  if (map.device() != dev) fail(op, "tile map is on " + map.device().str() + ", q on " + dev.str());
}

Shape lse_shape(const Tensor& q) { return {q.size(0), q.size(2), q.size(1)}; }

}  // namespace

void check_flash_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                         const DeviceTileMap& map, double scale, const Tensor& out,
                         const Tensor& lse) {
  const char* op = "flash_attention_forward";
  check_inputs(op, q, k, v);
  check_tensor(op, out, "out", q.shape(), q.dtype());
  check_tensor(op, lse, "lse", lse_shape(q), DType::f32);
  check_layout(op, {{&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}, {&lse, "lse"}});
  check_map(op, map, FlashPass::forward, q, k);
  check_scale(op, scale);
  check_devices(op, map, {{&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}, {&lse, "lse"}});
}

void check_flash_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                          const Tensor& lse, const Tensor& dout, const DeviceTileMap& map,
                          double scale, const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  const char* op = "flash_attention_backward";
  check_inputs(op, q, k, v);
  check_tensor(op, out, "out", q.shape(), q.dtype());
  check_tensor(op, lse, "lse", lse_shape(q), DType::f32);
  check_tensor(op, dout, "dout", q.shape(), q.dtype());
  check_tensor(op, dq, "dq", q.shape(), q.dtype());
  check_tensor(op, dk, "dk", k.shape(), q.dtype());
  check_tensor(op, dv, "dv", k.shape(), q.dtype());
  const NamedTensors all = {{&q, "q"},       {&k, "k"},   {&v, "v"},   {&out, "out"}, {&lse, "lse"},
                            {&dout, "dout"}, {&dq, "dq"}, {&dk, "dk"}, {&dv, "dv"}};
  check_layout(op, all);
  check_map(op, map, FlashPass::backward, q, k);
  check_scale(op, scale);
  check_devices(op, map, all);
}

}  // namespace detail
}  // namespace sprig::cuda
