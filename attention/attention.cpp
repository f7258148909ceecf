// The attention op: argument checks, output allocation and the dispatch to the CPU twin
// (attention/cpu_attention.h) or the CUDA twin (attention/cuda/flash.h); the AttentionMask and
// its lazily compiled tile maps.
#include "attention/attention.h"

#include <string>
#include <utility>

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

// The dtype the kernels of q's device compute in: on the CPU f64 (the reference) or f32; on CUDA
// bf16/f16 as they are, everything else as bf16.
DType kernel_dtype(const Tensor& q) {
  if (q.device().is_cpu()) return q.dtype() == DType::f64 ? DType::f64 : DType::f32;
  return q.dtype() == DType::f16 ? DType::f16 : DType::bf16;
}
DType lse_dtype(DType kernel) { return kernel == DType::f64 ? DType::f64 : DType::f32; }
Tensor as(const Tensor& x, DType dtype) { return x.to(dtype).contiguous(); }

}  // namespace

AttentionMask::AttentionMask(BatchMask mask)
    : mask_(std::move(mask)), intervals_(row_intervals(mask_)) {}

const TileMap& AttentionMask::tile_map(int32_t block_m, int32_t block_n) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto key = std::make_pair(block_m, block_n);
  auto it = tile_maps_.find(key);
  if (it == tile_maps_.end())
    it = tile_maps_.emplace(key, compile_tile_map(intervals_, block_m, block_n)).first;
  return it->second;
}

const cuda::DeviceTileMap& AttentionMask::device_tile_map(int32_t block_m, int32_t block_n,
                                                          Device device) const {
  const TileMap& map = tile_map(block_m, block_n);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto key = std::make_tuple(device.index, block_m, block_n);
  auto it = device_tile_maps_.find(key);
  if (it == device_tile_maps_.end())
    it = device_tile_maps_.emplace(key, cuda::upload_tile_map(map, device)).first;
  return it->second;
}

const cuda::cudnn::DeviceRagged& AttentionMask::cudnn_ragged(const CudnnMaskForm& form,
                                                             int64_t batch, int64_t heads_q,
                                                             int64_t heads_kv, int64_t head_dim,
                                                             Device device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto key = std::make_tuple(device.index, batch, heads_q, heads_kv, head_dim);
  auto it = cudnn_ragged_.find(key);
  if (it == cudnn_ragged_.end())
    it = cudnn_ragged_
             .emplace(key, cuda::cudnn::upload_ragged(
                               cuda::cudnn::ragged_sequences(form, batch, mask_.q_len()), heads_q,
                               heads_kv, head_dim, device))
             .first;
  return it->second;
}

std::shared_ptr<const AttentionMask> compile_attention_mask(BatchMask mask) {
  return std::make_shared<const AttentionMask>(std::move(mask));
}

AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const AttentionMask& mask, double scale) {
  check_inputs(q, k, v, mask.mask());
  const DType dt = kernel_dtype(q);
  const Device dev = q.device();
  AttentionOutput r{Tensor::empty(q.shape(), dt, dev),
                    Tensor::empty({q.size(0), q.size(2), q.size(1)}, lse_dtype(dt), dev)};
  SPRIG_DISPATCH(dev, attention_forward, as(q, dt), as(k, dt), as(v, dt), mask, scale, r.out,
                 r.lse);
  r.out = r.out.to(q.dtype());
  return r;
}

AttentionGrads attention_backward(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& dout,
                                  const AttentionMask& mask, double scale) {
  check_inputs(q, k, v, mask.mask());
  check_backward_inputs(q, out, lse, dout);
  const DType dt = kernel_dtype(q);
  const Device dev = q.device();
  AttentionGrads g{Tensor::empty(q.shape(), dt, dev), Tensor::empty(k.shape(), dt, dev),
                   Tensor::empty(v.shape(), dt, dev)};
  SPRIG_DISPATCH(dev, attention_backward, as(q, dt), as(k, dt), as(v, dt), as(out, dt),
                 as(lse, lse_dtype(dt)), as(dout, dt), mask, scale, g.dq, g.dk, g.dv);
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
