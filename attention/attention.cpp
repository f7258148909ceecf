// The attention op: argument checks, output allocation and dispatch to the CPU kernels
// (attention/cpu_attention.h).
#include "attention/attention.h"

#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "attention/cpu_attention.h"
#include "attention/cuda/flash.h"
#include "tensor/ops/dispatch.h"

namespace sprig {

namespace {

using detail::fail;
constexpr const char* kOp = "attention";

// Checks q [B, Tq, Hq, D], k and v [B, Tk, Hkv, D] against each other and against the mask.
void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const BatchMask& mask) {
  for (auto [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}}) {
    detail::check_defined(kOp, *t, name);
    detail::check_dim(kOp, *t, 4, name);
  }
  detail::check_floating(kOp, q, "q");
  detail::check_same_dtype(kOp, q, k);
  detail::check_same_dtype(kOp, q, v);
  detail::check_same_device(kOp, {&q, &k, &v});
  if (k.size(0) != q.size(0) || k.size(3) != q.size(3))
    fail(kOp, "k must have q's batch and head dim, got q " + shape_str(q.shape()) + " and k " +
                  shape_str(k.shape()));
  detail::check_shape(kOp, v, k.shape(), "v");
  if (k.size(2) < 1 || q.size(2) % k.size(2) != 0)
    fail(kOp, "query heads " + std::to_string(q.size(2)) + " must be a multiple of kv heads " +
                  std::to_string(k.size(2)));
  if (mask.q_len() != q.size(1) || mask.k_len() != k.size(1))
    fail(kOp, "mask is [" + std::to_string(mask.q_len()) + ", " + std::to_string(mask.k_len()) +
                  "] but q and k have lengths " + std::to_string(q.size(1)) + " and " +
                  std::to_string(k.size(1)));
  if (mask.num_rows() != 1 && mask.num_rows() != q.size(0))
    fail(kOp, "mask has " + std::to_string(mask.num_rows()) + " rows for a batch of " +
                  std::to_string(q.size(0)));
}

void check_backward_inputs(const Tensor& q, const Tensor& out, const Tensor& lse,
                           const Tensor& dout) {
  for (auto [t, name] : {std::pair{&out, "out"}, {&lse, "lse"}, {&dout, "dout"}})
    detail::check_defined(kOp, *t, name);
  detail::check_shape(kOp, out, q.shape(), "out");
  detail::check_shape(kOp, dout, q.shape(), "dout");
  detail::check_shape(kOp, lse, {q.size(0), q.size(2), q.size(1)}, "lse");
  detail::check_same_device(kOp, {&q, &out, &lse, &dout});
}

void check_reference_dtype(const Tensor& q) {
  if (q.dtype() != DType::f32 && q.dtype() != DType::f64)
    fail(kOp, std::string("the reference computes in f32 or f64, got ") + dtype_name(q.dtype()));
}

Tensor f32(const Tensor& x) { return x.to(DType::f32).contiguous(); }

// The dtype the CUDA kernels run in: bf16/f16 as they are, everything else as bf16.
DType kernel_dtype(const Tensor& q) {
  return q.dtype() == DType::f16 ? DType::f16 : DType::bf16;
}
Tensor for_kernel(const Tensor& x, DType dtype) { return x.to(dtype).contiguous(); }

}  // namespace

// Device tile maps by (device index, pass, head dim).
struct DeviceTileCache {
  std::mutex mutex;
  std::map<std::tuple<int, int, int64_t>, cuda::DeviceTileMap> maps;
};

namespace {

const cuda::DeviceTileMap& device_tiles(const AttentionMask& mask, cuda::FlashPass pass,
                                        int64_t head_dim, Device device) {
  std::lock_guard<std::mutex> lock(mask.device_tiles->mutex);
  const auto key = std::make_tuple(device.index, static_cast<int>(pass), head_dim);
  auto it = mask.device_tiles->maps.find(key);
  if (it == mask.device_tiles->maps.end()) {
    const cuda::TileShape shape = cuda::flash_tile_shape(pass, head_dim);
    const TileMap map = compile_tile_map(mask.intervals, shape.block_m, shape.block_n);
    it = mask.device_tiles->maps.emplace(key, cuda::upload_tile_map(map, device)).first;
  }
  return it->second;
}

}  // namespace

AttentionMask compile_attention_mask(BatchMask mask) {
  RowIntervals intervals = row_intervals(mask);
  TileMap tiles = compile_tile_map(intervals, cpu::kAttentionBlockM, cpu::kAttentionBlockN);
  return {std::move(mask), std::move(intervals), std::move(tiles),
          std::make_shared<DeviceTileCache>()};
}

AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionMask& mask, double scale) {
  check_inputs(q, k, v, mask.mask);
  if (q.device().is_cuda()) {
    const DType dt = kernel_dtype(q);
    const Tensor qk = for_kernel(q, dt);
    AttentionOutput r{Tensor::empty(q.shape(), dt, q.device()),
                      Tensor::empty({q.size(0), q.size(2), q.size(1)}, DType::f32, q.device())};
    cuda::flash_attention_forward(
        qk, for_kernel(k, dt), for_kernel(v, dt),
        device_tiles(mask, cuda::FlashPass::forward, q.size(3), q.device()), scale, r.out, r.lse,
        cuda::current_stream(q.device().index));
    r.out = r.out.to(q.dtype());
    return r;
  }
  if (q.dtype() == DType::f64) return attention_reference_forward(q, k, v, mask.mask, scale);
  AttentionOutput r{Tensor::empty(q.shape()), Tensor::empty({q.size(0), q.size(2), q.size(1)})};
  cpu::attention_forward(f32(q), f32(k), f32(v), mask.cpu_tiles, static_cast<float>(scale), r.out,
                         r.lse);
  r.out = r.out.to(q.dtype());
  return r;
}

AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  const AttentionMask& mask, double scale) {
  check_inputs(q, k, v, mask.mask);
  check_backward_inputs(q, out, lse, dout);
  if (q.device().is_cuda()) {
    const DType dt = kernel_dtype(q);
    AttentionGrads g{Tensor::empty(q.shape(), dt, q.device()), Tensor::empty(k.shape(), dt, k.device()),
                     Tensor::empty(v.shape(), dt, v.device())};
    cuda::flash_attention_backward(
        for_kernel(q, dt), for_kernel(k, dt), for_kernel(v, dt), for_kernel(out, dt),
        lse.contiguous(), for_kernel(dout, dt),
        device_tiles(mask, cuda::FlashPass::backward, q.size(3), q.device()), scale, g.dq, g.dk,
        g.dv, cuda::current_stream(q.device().index));
    return {g.dq.to(q.dtype()), g.dk.to(q.dtype()), g.dv.to(q.dtype())};
  }
  if (q.dtype() == DType::f64) return attention_reference_backward(q, k, v, dout, mask.mask, scale);
  AttentionGrads g{Tensor::empty(q.shape()), Tensor::empty(k.shape()), Tensor::empty(v.shape())};
  cpu::attention_backward(f32(q), f32(k), f32(v), f32(lse), f32(dout), mask.cpu_tiles,
                          static_cast<float>(scale), g.dq, g.dk, g.dv);
  return {g.dq.to(q.dtype()), g.dk.to(q.dtype()), g.dv.to(q.dtype())};
}

AttentionOutput attention_reference_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const BatchMask& mask, double scale) {
  check_inputs(q, k, v, mask);
  check_reference_dtype(q);
  AttentionOutput r{Tensor::empty(q.shape(), q.dtype()),
                    Tensor::empty({q.size(0), q.size(2), q.size(1)}, q.dtype())};
  cpu::attention_reference_forward(q.contiguous(), k.contiguous(), v.contiguous(), mask, scale,
                                   r.out, r.lse);
  return r;
}

AttentionGrads attention_reference_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const Tensor& dout, const BatchMask& mask,
                                            double scale) {
  check_inputs(q, k, v, mask);
  check_reference_dtype(q);
  detail::check_shape(kOp, dout, q.shape(), "dout");
  detail::check_same_dtype(kOp, q, dout);
  AttentionGrads g{Tensor::empty(q.shape(), q.dtype()), Tensor::empty(k.shape(), q.dtype()),
                   Tensor::empty(v.shape(), q.dtype())};
  cpu::attention_reference_backward(q.contiguous(), k.contiguous(), v.contiguous(),
                                    dout.contiguous(), mask, scale, g.dq, g.dk, g.dv);
  return g;
}

}  // namespace sprig
