// cuDNN's fused attention through the backend API (attention/cudnn/sdpa.h): the forward and
// backward graphs (built with graph_builder.h), plan caching and execution. Built only when cuDNN
// is (sdpa_stubs.cpp stands in otherwise).
//
// The graphs are the ones cuDNN's runtime fusion engine recognises as flash attention:
//   forward:  S = (Q K^T) * scale -> [padding mask] -> causal mask -> [window] ->
//             softmax (max, exp, sum; stats = max + log sum) -> O = P V
//   backward: softmax_sum = rowsum(dO * O); P = exp(S - stats) under the same masks;
//             dV = P^T dO; dS = (dO V^T - softmax_sum) * P * scale; dK = dS^T Q; dQ = dS K
//             (through an f32 accumulator), with a head-group reduction of dK and dV under GQA.
// Masks are index comparisons (row >= col; col + window > row; row < seq_len_q, col < seq_len_kv
// for ragged or padded sequences) feeding a select of -inf (masked_score).
#include "attention/cudnn/sdpa.h"

#include <cudnn.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "attention/cudnn/graph_builder.h"
#include "attention/cudnn/sdpa_plan.h"

namespace sprig::cuda::cudnn {

namespace {

using namespace graph;  // the builder's types are this file's vocabulary

TensorLayout scores_layout(const SdpaShape& s) {
  const int64_t n = s.seq_len;
  return {{s.batch, s.heads_q, n, n}, {s.heads_q * n * n, n * n, n, 1}};
}
TensorLayout row_layout(const SdpaShape& s) {
  return {{s.batch, s.heads_q, s.seq_len, 1}, {s.heads_q * s.seq_len, s.seq_len, 1, 1}};
}
// [b, Hq, s, d] head-major (the full-head dK/dV before the GQA reduction, the unragged dQ
// accumulator).
TensorLayout head_major_layout(const SdpaShape& s) {
  const int64_t n = s.seq_len, d = s.head_dim;
  return {{s.batch, s.heads_q, n, d}, {s.heads_q * n * d, n * d, d, 1}};
}

// The inputs of the masks: the -inf they select, the window's width and the sequence lengths
// (only where used: every bound tensor is in the graph).
struct MaskInputs {
  TensorRef neg_inf;
  std::optional<TensorRef> window, seq_q, seq_kv;
};

// Whether the graph binds sequence lengths (and has the padding mask).
bool has_seq_lens(const SdpaShape& s) { return s.ragged || s.padded; }

MaskInputs mask_inputs(GraphBuilder& g, const SdpaShape& s) {
  MaskInputs m{g.scalar(Slot::neg_inf, CUDNN_DATA_FLOAT), {}, {}, {}};
  if (s.window > 0) m.window = g.scalar(Slot::window, CUDNN_DATA_FLOAT);
  if (has_seq_lens(s)) {
    const TensorLayout l{{s.batch, 1, 1, 1}, {1, 1, 1, 1}};
    m.seq_q = g.bound(Slot::seq_lens, l, CUDNN_DATA_INT32);
    m.seq_kv = g.bound(Slot::seq_lens, l, CUDNN_DATA_INT32);
  }
  return m;
}

// -inf where `keep` is false.
TensorRef select(GraphBuilder& g, const TensorRef& scores, const TensorRef& keep,
                 const MaskInputs& m) {
  TensorRef y = g.virtual_tensor(scores.layout, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, scores, &m.neg_inf, &keep, y);
  return y;
}

TensorRef index(GraphBuilder& g, const TensorRef& scores, int64_t axis) {
  return g.pointwise(CUDNN_POINTWISE_GEN_INDEX, scores, nullptr, CUDNN_DATA_INT32, CUDNN_DATA_INT32,
                     axis);
}

// The padding mask of ragged or padded sequences: row < seq_len_q and col < seq_len_kv.
TensorRef padding_mask(GraphBuilder& g, const TensorRef& scores, const MaskInputs& m) {
  const TensorRef row = index(g, scores, 2), col = index(g, scores, 3);
  const TensorRef row_ok =
      g.pointwise(CUDNN_POINTWISE_CMP_LT, row, &*m.seq_q, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
  const TensorRef col_ok =
      g.pointwise(CUDNN_POINTWISE_CMP_LT, col, &*m.seq_kv, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
  const TensorRef both = g.pointwise(CUDNN_POINTWISE_LOGICAL_AND, row_ok, &col_ok,
                                     CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
  return select(g, scores, both, m);
}

// The causal mask (row >= col), then the sliding window (col + window > row) when there is one.
TensorRef band_masks(GraphBuilder& g, TensorRef scores, const SdpaShape& s, const MaskInputs& m) {
  {
    const TensorRef row = index(g, scores, 2), col = index(g, scores, 3);
    const TensorRef causal =
        g.pointwise(CUDNN_POINTWISE_CMP_GE, row, &col, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
    scores = select(g, scores, causal, m);
  }
  if (s.window > 0) {
    const TensorRef row = index(g, scores, 2), col = index(g, scores, 3);
    const TensorRef reach = g.pointwise(CUDNN_POINTWISE_ADD, col, &*m.window);
    const TensorRef inside =
        g.pointwise(CUDNN_POINTWISE_CMP_GT, reach, &row, CUDNN_DATA_BOOLEAN, CUDNN_DATA_BOOLEAN);
    scores = select(g, scores, inside, m);
  }
  return scores;
}

// The tensors of sprig's side, as both graphs see them.
struct IoTensors {
  TensorRef q, k_t, v, out, stats;
};

IoTensors io_tensors(GraphBuilder& g, const SdpaShape& s, bool v_transposed) {
  auto ragged = [&](Slot slot) { return s.ragged ? std::optional<Slot>(slot) : std::nullopt; };
  const TensorLayout ql = token_major_layout(s, s.heads_q), kl = token_major_layout(s, s.heads_kv);
  return {g.bound(Slot::q, ql, g.io(), ragged(Slot::q_offsets)),
          g.bound(Slot::k, transposed(kl), g.io(), ragged(Slot::kv_offsets)),
          g.bound(Slot::v, v_transposed ? transposed(kl) : kl, g.io(), ragged(Slot::kv_offsets)),
          g.bound(Slot::out, ql, g.io(), ragged(Slot::q_offsets)),
          g.bound(Slot::stats, stats_layout(s), CUDNN_DATA_FLOAT, ragged(Slot::stats_offsets))};
}

void forward_graph(GraphBuilder& g, const SdpaShape& s) {
  const IoTensors t = io_tensors(g, s, false);
  const MaskInputs m = mask_inputs(g, s);
  const TensorRef scale = g.scalar(Slot::scale, CUDNN_DATA_FLOAT);
  const bool seqs = has_seq_lens(s);
  const TensorRef *seq_q = seqs ? &*m.seq_q : nullptr, *seq_kv = seqs ? &*m.seq_kv : nullptr;
  TensorRef scores = g.virtual_tensor(scores_layout(s), CUDNN_DATA_FLOAT);
  g.matmul(t.q, t.k_t, scores, {seq_q, seq_kv, nullptr}, seqs);
  scores = g.pointwise(CUDNN_POINTWISE_MUL, scores, &scale);
  if (seqs) scores = padding_mask(g, scores, m);
  scores = band_masks(g, scores, s, m);

  const TensorRef max = g.virtual_tensor(row_layout(s), CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, scores, max);
  const TensorRef shifted = g.pointwise(CUDNN_POINTWISE_SUB, scores, &max);
  const TensorRef exp = g.pointwise(CUDNN_POINTWISE_EXP, shifted, nullptr);
  const TensorRef sum = g.virtual_tensor(row_layout(s), CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, exp, sum);
  const TensorRef log_sum = g.pointwise(CUDNN_POINTWISE_LOG, sum, nullptr);
  g.pointwise(CUDNN_POINTWISE_ADD, max, &log_sum, nullptr, t.stats);
  const TensorRef probs = g.pointwise(CUDNN_POINTWISE_DIV, exp, &sum, g.io());

  g.matmul(probs, t.v, t.out, {seq_q, nullptr, seq_kv});
}

// dK or dV: a^T b (a: the [b, Hq, s_q, s_kv] scores seen transposed), reduced over each kv
// head's query heads under GQA.
void key_gradient(GraphBuilder& g, const TensorRef& a_t, const TensorRef& b, const TensorRef& out,
                  const SdpaShape& s, GraphBuilder::Overrides o) {
  if (s.heads_q == s.heads_kv) return g.matmul(a_t, b, out, o);
  const TensorRef full = g.virtual_tensor(head_major_layout(s), g.io());
  g.matmul(a_t, b, full, o);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, full, out);
}

void backward_graph(GraphBuilder& g, const SdpaShape& s) {
  auto ragged = [&](Slot slot) { return s.ragged ? std::optional<Slot>(slot) : std::nullopt; };
  const IoTensors t = io_tensors(g, s, true);  // v as V^T
  const TensorLayout ql = token_major_layout(s, s.heads_q), kl = token_major_layout(s, s.heads_kv);
  const TensorRef dout = g.bound(Slot::dout, ql, g.io(), ragged(Slot::q_offsets));
  const TensorRef dq = g.bound(Slot::dq, ql, g.io(), ragged(Slot::q_offsets));
  const TensorRef dk = g.bound(Slot::dk, kl, g.io(), ragged(Slot::kv_offsets));
  const TensorRef dv = g.bound(Slot::dv, kl, g.io(), ragged(Slot::kv_offsets));
  const TensorRef softmax_sum =
      g.bound(Slot::softmax_sum, stats_layout(s), CUDNN_DATA_FLOAT, ragged(Slot::stats_offsets));
  const TensorRef dq_accum = g.bound(Slot::dq_accum, s.ragged ? ql : head_major_layout(s),
                                     CUDNN_DATA_FLOAT, ragged(Slot::q_offsets));
  const MaskInputs m = mask_inputs(g, s);
  const TensorRef scale = g.scalar(Slot::scale, CUDNN_DATA_FLOAT);
  const TensorRef one = g.scalar(Slot::one, CUDNN_DATA_FLOAT);
  const bool seqs = has_seq_lens(s);
  const TensorRef *seq_q = seqs ? &*m.seq_q : nullptr, *seq_kv = seqs ? &*m.seq_kv : nullptr;

  // softmax_sum = rowsum(dO * O)
  const TensorRef d_o = g.pointwise(CUDNN_POINTWISE_MUL, dout, &t.out);
  const TensorRef row_sum = g.virtual_tensor(row_layout(s), CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, d_o, row_sum);
  g.pointwise(CUDNN_POINTWISE_MUL, row_sum, &one, nullptr, softmax_sum);

  // P = exp(S * scale - stats) under the masks
  TensorRef scores = g.virtual_tensor(scores_layout(s), CUDNN_DATA_FLOAT);
  g.matmul(t.q, t.k_t, scores, {seq_q, seq_kv, nullptr});
  scores = g.pointwise(CUDNN_POINTWISE_MUL, scores, &scale);
  if (seqs) scores = padding_mask(g, scores, m);  // before the statistics, as cuDNN's own
  scores = band_masks(g, g.pointwise(CUDNN_POINTWISE_SUB, scores, &t.stats), s, m);
  const TensorRef probs = g.pointwise(CUDNN_POINTWISE_EXP, scores, nullptr);

  const TensorLayout scores_t = transposed(scores_layout(s));
  const GraphBuilder::Overrides key_rows{seq_kv, nullptr, seq_q};
  key_gradient(g, g.reshape(probs, scores_t, g.io()), dout, dv, s, key_rows);

  // dS = (dO V^T - softmax_sum) * P * scale
  TensorRef dp = g.virtual_tensor(scores_layout(s), CUDNN_DATA_FLOAT);
  g.matmul(dout, t.v, dp, {seq_q, seq_kv, nullptr});
  dp = g.pointwise(CUDNN_POINTWISE_SUB, dp, &softmax_sum);
  dp = g.pointwise(CUDNN_POINTWISE_MUL, dp, &probs);
  const TensorRef ds = g.pointwise(CUDNN_POINTWISE_MUL, dp, &scale);
  key_gradient(g, g.reshape(ds, scores_t, g.io()), t.q, dk, s, key_rows);

  // dQ = dS K, accumulated in f32
  const TensorRef k = g.reshape(t.k_t, kl, g.io(), ragged(Slot::kv_offsets));
  g.matmul(ds, k, dq_accum, {seq_q, nullptr, seq_kv});
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_accum, nullptr, nullptr, dq);
}

void describe(GraphBuilder& g, SdpaPass pass, const SdpaShape& s) {
  if (pass == SdpaPass::forward)
    forward_graph(g, s);
  else
    backward_graph(g, s);
}

// ---- handles and the plan cache ---------------------------------------------------------------

// One handle per device. A handle runs on the stream last set on it, so setting the stream and
// executing happen under its own lock: two threads cannot interleave on one handle.
struct DeviceHandle {
  cudnnHandle_t handle = nullptr;
  std::mutex mutex;
};

std::mutex g_mutex;  // guards g_handles and g_plans
std::map<int, DeviceHandle> g_handles;
// Built plans, and the keys cuDNN refused (null plan, the reason kept), so neither is rebuilt.
BoundedCache<SdpaPlanKey, std::pair<std::shared_ptr<Plan>, std::string>> g_plans(
    kPlanCacheCapacity);

// The device's handle (the caller holds a DeviceGuard for it), created on first use.
DeviceHandle& handle_for(int device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  DeviceHandle& h = g_handles[device];
  if (!h.handle) check(cudnnCreate(&h.handle), "creating a handle");
  return h;
}

std::shared_ptr<Plan> plan_for(const SdpaPlanKey& key, cudnnHandle_t handle, const SdpaShape& s) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (const auto* cached = g_plans.find(key)) {
      if (!cached->first) throw Unsupported(cached->second);
      return cached->first;
    }
  }
  std::shared_ptr<Plan> plan;
  try {
    GraphBuilder g(handle, io_type(key.dtype));
    describe(g, key.pass, s);
    plan = g.build();
  } catch (const Unsupported& e) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_plans.put(key, {nullptr, e.what()});
    throw;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_plans.put(key, {plan, std::string()}).first;
}

void execute(cudnnHandle_t handle, const Plan& plan,
             const std::array<void*, size_t(Slot::count)>& at, int device) {
  std::vector<int64_t> uids;
  std::vector<void*> pointers;
  for (const auto& [uid, slot] : plan.bindings) {
    uids.push_back(uid);
    pointers.push_back(at[static_cast<size_t>(slot)]);
  }
  // Workspace from the caching allocator, ordered on the device's current stream like the work.
  const Tensor workspace =
      Tensor::empty({std::max<int64_t>(plan.workspace, 1)}, DType::boolean, Device::cuda(device));
  void* ws = workspace.data_ptr();
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(),
           static_cast<int64_t>(uids.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, pointers.data(),
           static_cast<int64_t>(pointers.size()))
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &ws);
  check(pack.finalize(), "finalising the variant pack");
  check(cudnnBackendExecute(handle, plan.plan->get(), pack.get()), "executing attention");
}

// What one call needs besides its tensors: the shape cuDNN sees, the ragged sequences, the
// scalars, and the pointer of every slot; run() finds the plan and executes it.
struct Call {
  SdpaShape shape;
  const DeviceRagged* ragged = nullptr;
  float scale = 0, neg_inf = 0, window = 0, one = 1;
  std::array<void*, size_t(Slot::count)> at{};

  Call(const Tensor& q, const Tensor& k, const AttentionMask& mask, const CudnnMaskForm& form,
       double scale_, SdpaPass pass) {
    const int version = runtime_version();
    shape = call_shape(q, k, mask, form, pass, version, &ragged);
    scale = static_cast<float>(scale_);
    neg_inf = masked_score(version);
    window = static_cast<float>(form.window);
    bind(Slot::scale, &scale), bind(Slot::neg_inf, &neg_inf), bind(Slot::window, &window);
    bind(Slot::one, &one);
    if (ragged) {
      bind(Slot::seq_lens, ragged->seq_lens), bind(Slot::q_offsets, ragged->q_offsets);
      bind(Slot::kv_offsets, ragged->kv_offsets), bind(Slot::stats_offsets, ragged->stats_offsets);
    }
  }
  void bind(Slot slot, void* p) { at[static_cast<size_t>(slot)] = p; }
  void bind(Slot slot, const Tensor& t) { bind(slot, t.data_ptr()); }
  void run(SdpaPass pass, DType dtype, int device, cudaStream_t stream) {
    DeviceHandle& h = handle_for(device);
    const SdpaPlanKey key = sdpa_plan_key(device, dtype, pass, shape);
    std::lock_guard<std::mutex> lock(h.mutex);  // plan building and execution use the handle
    const std::shared_ptr<Plan> plan = plan_for(key, h.handle, shape);
    check(cudnnSetStream(h.handle, stream), "setting the stream");
    execute(h.handle, *plan, at, device);
  }
};

// A token-major [B, T, Hq] buffer for the statistics of ragged sequences; as_lse views it in
// lse's [B, Hq, T] order.
Tensor token_major_stats(const Tensor& lse) {
  const int64_t B = lse.size(0), H = lse.size(1), T = lse.size(2);
  return Tensor::empty({B, T, H}, DType::f32, lse.device());
}
Tensor as_lse(const Tensor& stats) { return stats.permute({0, 2, 1}); }

}  // namespace

int64_t describe_graph(DType dtype, SdpaPass pass, const SdpaShape& shape) {
  GraphBuilder g(nullptr, io_type(dtype));
  describe(g, pass, shape);
  return g.num_operations();
}

int compiled_version() { return CUDNN_VERSION; }
int runtime_version() { return static_cast<int>(cudnnGetVersion()); }

void sdpa_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMask& mask,
                  const CudnnMaskForm& form, double scale, const Tensor& out, const Tensor& lse,
                  cudaStream_t stream) {
  Call c(q, k, mask, form, scale, SdpaPass::forward);
  const Tensor stats = form.ragged ? token_major_stats(lse) : lse;
  c.bind(Slot::q, q), c.bind(Slot::k, k), c.bind(Slot::v, v), c.bind(Slot::out, out);
  c.bind(Slot::stats, stats);
  c.run(SdpaPass::forward, q.dtype(), q.device().index, stream);
  if (form.ragged) lse.copy_(as_lse(stats));
}

void sdpa_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                   const Tensor& lse, const Tensor& dout, const AttentionMask& mask,
                   const CudnnMaskForm& form, double scale, const Tensor& dq, const Tensor& dk,
                   const Tensor& dv, cudaStream_t stream) {
  Call c(q, k, mask, form, scale, SdpaPass::backward);
  Tensor stats = lse;
  if (form.ragged) {
    stats = token_major_stats(lse);
    as_lse(stats).copy_(lse);
  }
  const Tensor softmax_sum = Tensor::empty(stats.shape(), DType::f32, q.device());
  const Tensor dq_accum = Tensor::zeros(q.shape(), DType::f32, q.device());
  c.bind(Slot::q, q), c.bind(Slot::k, k), c.bind(Slot::v, v), c.bind(Slot::out, out);
  c.bind(Slot::stats, stats), c.bind(Slot::dout, dout), c.bind(Slot::dq, dq);
  c.bind(Slot::dk, dk), c.bind(Slot::dv, dv);
  c.bind(Slot::softmax_sum, softmax_sum), c.bind(Slot::dq_accum, dq_accum);
  c.run(SdpaPass::backward, q.dtype(), q.device().index, stream);
}

}  // namespace sprig::cuda::cudnn
