// CUDA optimizer kernels (twin of tensor/cpu/optim.cpp): sum of squares for gradient norms and
// the in-place AdamW update (torch.optim.AdamW, single-tensor path).
// sum_squares is a deterministic two-stage reduction: a grid-stride pass writes one partial sum
// per block, then one block adds the partials in a fixed order into the f32 output element.
// adamw is elementwise over fp32 param / exp_avg / exp_avg_sq with an f32 or bf16 gradient and an
// optional bf16/f16 compute copy of the updated parameter.
#include <algorithm>

#include "tensor/cuda/common.cuh"

namespace sprig::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxPartials = 1024;

template <class T>
__global__ void sum_squares_partial_kernel(const T* __restrict__ x, int64_t n,
                                           acc_t<T>* __restrict__ partial) {
  using A = acc_t<T>;
  A sum = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    sum += to_acc(x[i]) * to_acc(x[i]);
  sum = block_sum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

template <class A>
__global__ void sum_partials_kernel(const A* __restrict__ partial, int64_t count,
                                    float* __restrict__ out) {
  A sum = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += partial[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0) *out = static_cast<float>(sum);
}

// One AdamW update per element; `copy` (type C) may be null.
template <class G, class C>
__global__ void adamw_kernel(float* __restrict__ p, const G* __restrict__ grad,
                             float* __restrict__ m, float* __restrict__ v, C* __restrict__ copy,
                             int64_t n, AdamWScalars s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float g = to_float(grad[i]) * s.grad_scale;
    const float mi = m[i] + s.one_minus_beta1 * (g - m[i]);  // torch's lerp(m, g, 1 - beta1)
    const float vi = v[i] * s.beta2 + s.one_minus_beta2 * g * g;
    const float denom = ::sqrt(vi) / s.bias2_sqrt + s.eps;
    const float pi = p[i] * s.decay - s.step_size * (mi / denom);  // decoupled weight decay
    m[i] = mi;
    v[i] = vi;
    p[i] = pi;
    if (copy) copy[i] = from_float<C>(pi);
  }
}

}  // namespace

void sum_squares(const Tensor& x, const Tensor& out, cudaStream_t stream) {
  const int64_t n = x.numel();
  const int64_t blocks = std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, kMaxPartials);
  visit_floating(x.dtype(), "sum_squares", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const DType acc_dtype = std::is_same_v<A, double> ? DType::f64 : DType::f32;
    const Tensor partial = scratch_tensor("sum_squares", {blocks}, acc_dtype, x.device(), stream);
    A* pp = static_cast<A*>(partial.data_ptr());
    launch(sum_squares_partial_kernel<T>, static_cast<unsigned>(blocks), kThreads, 0, stream,
           static_cast<const T*>(x.data_ptr()), n, pp);
    CUDA_CHECK(cudaGetLastError());
    launch(sum_partials_kernel<A>, 1, kThreads, 0, stream, pp, blocks,
           static_cast<float*>(out.data_ptr()));
  });
  CUDA_CHECK(cudaGetLastError());
}

void adamw(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
           const Tensor& compute_copy, const AdamWParams& hp, cudaStream_t stream) {
  const int64_t n = param.numel();
  const AdamWScalars s = adamw_scalars(hp);
  float* p = static_cast<float*>(param.data_ptr());
  float* m = static_cast<float*>(exp_avg.data_ptr());
  float* v = static_cast<float*>(exp_avg_sq.data_ptr());
  const auto launch_adamw = [&](auto g_tag, auto c_tag) {
    using G = decltype(g_tag);
    using C = decltype(c_tag);
    C* copy = compute_copy.defined() ? static_cast<C*>(compute_copy.data_ptr()) : nullptr;
    launch(adamw_kernel<G, C>, grid_for(n, kThreads), kThreads, 0, stream, p,
           static_cast<const G*>(grad.data_ptr()), m, v, copy, n, s);
  };
  const auto with_grad_type = [&](auto c_tag) {
    if (grad.dtype() == DType::bf16)
      launch_adamw(__nv_bfloat16{}, c_tag);
    else
      launch_adamw(float{}, c_tag);
  };
  // The copy type is bf16 when there is no compute copy (the kernel then never writes it).
  if (compute_copy.defined() && compute_copy.dtype() == DType::f16)
    with_grad_type(__half{});
  else
    with_grad_type(__nv_bfloat16{});
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sprig::cuda
