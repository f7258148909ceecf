// A small builder of cuDNN operation graphs on the backend C API, for the attention graphs of
// sdpa.cpp: owned descriptors, tensors (bound to a Slot of the execution, by-value scalars or
// virtual), pointwise, reduction, matmul and reshape operations, and the plan of the first engine
// configuration cuDNN's heuristics offer that finalises. Only sdpa.cpp includes it (cuDNN builds).
#pragma once

#include <cudnn.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attention/cudnn/sdpa.h"
#include "attention/cudnn/sdpa_plan.h"

namespace sprig::cuda::cudnn::graph {

inline std::string status_text(cudnnStatus_t status) {
  std::string text = cudnnGetErrorString(status);
  char detail[1024] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  if (detail[0]) text += std::string(" (") + detail + ")";
  return text;
}

inline void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string("[cudnn] ") + what + ": " + status_text(status));
}

// One backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    check(cudnnBackendCreateDescriptor(type, &d_), "creating a descriptor");
  }
  ~Descriptor() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                  const void* values, int64_t count = 1) {
    const cudnnStatus_t status = cudnnBackendSetAttribute(d_, name, type, count, values);
    if (status != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error("[cudnn] setting attribute " + std::to_string(name) + ": " +
                               status_text(status));
    return *this;
  }
  Descriptor& set(cudnnBackendAttributeName_t name, const Descriptor& other) {
    const cudnnBackendDescriptor_t raw = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &raw);
  }
  cudnnStatus_t finalize() { return cudnnBackendFinalize(d_); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// The device buffers and host scalars an execution binds; each graph tensor that is not virtual
// reads or writes one of them.
enum class Slot : uint8_t {
  q,
  k,
  v,
  out,
  stats,
  dout,
  dq,
  dk,
  dv,  // sprig's tensors (stats: lse or its token-major copy)
  softmax_sum,
  dq_accum,  // f32 scratch of the backward
  seq_lens,
  q_offsets,
  kv_offsets,
  stats_offsets,
  scale,
  neg_inf,
  window,
  one,  // host scalars passed by value
  count
};

struct TensorRef {
  const Descriptor* desc = nullptr;
  TensorLayout layout;
};

// A built plan: the descriptors it was made of (kept alive with it), the slot of every bound
// tensor, and its workspace size.
struct Plan {
  std::vector<std::unique_ptr<Descriptor>> descriptors;
  const Descriptor* plan = nullptr;
  std::vector<std::pair<int64_t, Slot>> bindings;
  int64_t workspace = 0;
};

inline cudnnDataType_t io_type(DType dtype) {
  return dtype == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
}

// Builds one operation graph and its execution plan.
class GraphBuilder {
 public:
  GraphBuilder(cudnnHandle_t handle, cudnnDataType_t io) : handle_(handle), io_(io) {}

  // A tensor bound to `slot` at execution (ragged: its ragged-offset tensor's slot).
  TensorRef bound(Slot slot, const TensorLayout& l, cudnnDataType_t type,
                  std::optional<Slot> ragged = std::nullopt) {
    const Descriptor* offsets = ragged ? offsets_tensor(l, *ragged) : nullptr;
    return {make_tensor(l, type, slot, false, offsets), l};
  }
  // A scalar passed by value from host memory.
  TensorRef scalar(Slot slot, cudnnDataType_t type) {
    const TensorLayout l{{1, 1, 1, 1}, {1, 1, 1, 1}};
    return {make_tensor(l, type, slot, true, nullptr), l};
  }
  TensorRef virtual_tensor(const TensorLayout& l, cudnnDataType_t type) {
    return {make_tensor(l, type, std::nullopt, false, nullptr), l};
  }

  // y = mode(x[, b][, t]); math: the computation's precision; axis: GEN_INDEX's dimension.
  void pointwise(cudnnPointwiseMode_t mode, const TensorRef& x, const TensorRef* b,
                 const TensorRef* t, const TensorRef& y, cudnnDataType_t math = CUDNN_DATA_FLOAT,
                 int64_t axis = -1) {
    Descriptor& pw = add(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &math);
    if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    finalize(pw, "pointwise descriptor");
    Descriptor& op = add(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    const float one = 1.0f;
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *x.desc)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *y.desc)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, &one)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, &one);
    if (b) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b->desc);
    if (t) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t->desc);
    operation(op, "pointwise operation");
  }
  // The same into a new virtual tensor of x's layout (or `l`).
  TensorRef pointwise(cudnnPointwiseMode_t mode, const TensorRef& x, const TensorRef* b,
                      cudnnDataType_t out = CUDNN_DATA_FLOAT,
                      cudnnDataType_t math = CUDNN_DATA_FLOAT, int64_t axis = -1) {
    TensorRef y = virtual_tensor(x.layout, out);
    pointwise(mode, x, b, nullptr, y, math, axis);
    return y;
  }

  void reduction(cudnnReduceTensorOp_t mode, const TensorRef& x, const TensorRef& y) {
    Descriptor& red = add(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t math = CUDNN_DATA_FLOAT;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &math);
    finalize(red, "reduction descriptor");
    Descriptor& op = add(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, *x.desc)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, *y.desc);
    operation(op, "reduction operation");
  }

  // c = a b; the overrides bound the rows (m), columns (n) and inner dimension (k) per sequence.
  struct Overrides {
    const TensorRef *m = nullptr, *n = nullptr, *k = nullptr;
  };
  void matmul(const TensorRef& a, const TensorRef& b, const TensorRef& c, Overrides o,
              bool pad_zero = false) {
    Descriptor& mm = add(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t math = CUDNN_DATA_FLOAT;
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &math);
    const double zero = 0.0;
    if (pad_zero) mm.set(CUDNN_ATTR_MATMUL_PADDING_VALUE, CUDNN_TYPE_DOUBLE, &zero);
    finalize(mm, "matmul descriptor");
    Descriptor& op = add(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, *a.desc)
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, *b.desc)
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, *c.desc)
        .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    if (o.m) op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, *o.m->desc);
    if (o.n) op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, *o.n->desc);
    if (o.k) op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, *o.k->desc);
    operation(op, "matmul operation");
  }

  // The same memory seen in another layout (a transpose); ragged: the slot of x's offsets.
  TensorRef reshape(const TensorRef& x, const TensorLayout& l, cudnnDataType_t type,
                    std::optional<Slot> ragged = std::nullopt) {
    const Descriptor* offsets = ragged ? offsets_tensor(l, *ragged) : nullptr;
    const TensorRef y{make_tensor(l, type, std::nullopt, false, offsets), l};
    Descriptor& op = add(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, *x.desc)
        .set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, *y.desc);
    operation(op, "reshape operation");
    return y;
  }

  cudnnDataType_t io() const { return io_; }
  int64_t num_operations() const { return static_cast<int64_t>(ops_.size()); }

  // The operation graph, cuDNN's heuristics and the first engine configuration that finalises
  // into a plan. Throws Unsupported when none does.
  std::shared_ptr<Plan> build() {
    Descriptor& graph = add(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph
        .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops_.data(),
             static_cast<int64_t>(ops_.size()))
        .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle_);
    unsupported_unless(graph.finalize(), "the operation graph");
    Descriptor& heuristics = add(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
        .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
    unsupported_unless(heuristics.finalize(), "the engine heuristics");
    int64_t count = 0;
    check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
          "counting engine configurations");
    std::vector<cudnnBackendDescriptor_t> configs;
    for (int64_t i = 0; i < count; ++i)
      configs.push_back(add(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR).get());
    check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, configs.data()),
          "reading engine configurations");
    std::string last = "no engine configuration";
    for (int64_t i = 0; i < count; ++i) {
      Descriptor& plan = add(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle_)
          .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, &configs[i]);
      const cudnnStatus_t status = plan.finalize();
      if (status != CUDNN_STATUS_SUCCESS) {
        last = status_text(status);
        continue;
      }
      auto built = std::make_shared<Plan>();
      check(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, nullptr, &built->workspace),
            "reading the workspace size");
      built->plan = &plan;
      built->descriptors = std::move(descriptors_);
      built->bindings = std::move(bindings_);
      return built;
    }
    throw Unsupported("[cudnn] no engine runs this attention graph (" + last + ")");
  }

 private:
  Descriptor& add(cudnnBackendDescriptorType_t type) {
    descriptors_.push_back(std::make_unique<Descriptor>(type));
    return *descriptors_.back();
  }
  void finalize(Descriptor& d, const char* what) {
    check(d.finalize(), (std::string("finalising the ") + what).c_str());
  }
  void operation(Descriptor& op, const char* what) {
    finalize(op, what);
    ops_.push_back(op.get());
  }
  static void unsupported_unless(cudnnStatus_t status, const char* what) {
    if (status != CUDNN_STATUS_SUCCESS)
      throw Unsupported(std::string("[cudnn] cuDNN refuses ") + what + ": " + status_text(status));
  }
  // The i64 ragged offsets [b + 1, 1, 1, 1] of a tensor of layout l, bound to `slot`.
  const Descriptor* offsets_tensor(const TensorLayout& l, Slot slot) {
    return make_tensor({{l.dims[0] + 1, 1, 1, 1}, {1, 1, 1, 1}}, CUDNN_DATA_INT64, slot, false,
                       nullptr);
  }
  const Descriptor* make_tensor(const TensorLayout& l, cudnnDataType_t type,
                                std::optional<Slot> slot, bool by_value, const Descriptor* ragged) {
    Descriptor& t = add(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t uid = next_uid_++, alignment = 16;
    const bool is_virtual = !slot;
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, l.dims.data(), 4)
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, l.strides.data(), 4)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
    if (ragged) t.set(CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, *ragged);
    finalize(t, "tensor descriptor");
    if (slot) bindings_.emplace_back(uid, *slot);
    return &t;
  }

  cudnnHandle_t handle_;
  cudnnDataType_t io_;
  int64_t next_uid_ = 1;
  std::vector<std::unique_ptr<Descriptor>> descriptors_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  std::vector<std::pair<int64_t, Slot>> bindings_;
};

}  // namespace sprig::cuda::cudnn::graph
