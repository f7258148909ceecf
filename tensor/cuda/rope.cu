// CUDA rotary embedding, rotate-half layout (twin of tensor/cpu/rope.cpp).
// Layout: x, y [B, T, nH, D] contiguous, pos [B, T] i32/i64. One block per token: its threads first
// compute the token's D/2 (cos, sin) pairs into shared memory as the CPU does (fp32 angle
// float(pos) * inv_freq, cos/sin evaluated in f64 and rounded to fp32, where the CPU's vectorised
// fp32 ones are within 2^-23, then to x's dtype as HF does), then rotate every head of the token.
// The inverse rotation (backward) negates sin.
#include <algorithm>
#include <string>

#include "tensor/cuda/common.cuh"

namespace sprig::cuda {

namespace {

constexpr int kMaxHalf = 256;  // head dims up to 512
constexpr int kThreads = 128;

// The fp32 inverse frequencies of the host's RopeFrequencies, passed by value.
struct InvFreq {
  float v[kMaxHalf];
};

template <class T>
__global__ void rope_kernel(const T* __restrict__ x, const void* __restrict__ pos, bool pos64,
                            T* __restrict__ y, int64_t heads, int half, InvFreq inv_freq,
                            float scale, bool inverse) {
  using A = acc_t<T>;
  __shared__ A cos_s[kMaxHalf], sin_s[kMaxHalf];
  const int64_t tok = blockIdx.x;
  const int64_t p =
      pos64 ? static_cast<const int64_t*>(pos)[tok] : static_cast<const int32_t*>(pos)[tok];
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const double freq = static_cast<float>(p) * inv_freq.v[i];
    const A s = round_to<T>(static_cast<float>(::sin(freq)) * scale);
    cos_s[i] = round_to<T>(static_cast<float>(::cos(freq)) * scale);
    sin_s[i] = inverse ? -s : s;
  }
  __syncthreads();
  const T* xt = x + tok * heads * 2 * half;
  T* yt = y + tok * heads * 2 * half;
  for (int64_t j = threadIdx.x; j < heads * half; j += blockDim.x) {
    const int i = static_cast<int>(j % half);
    const int64_t a = (j / half) * 2 * half + i, b = a + half;
    const A x1 = to_acc(xt[a]), x2 = to_acc(xt[b]);
    yt[a] = from_acc<T>(x1 * cos_s[i] - x2 * sin_s[i]);
    yt[b] = from_acc<T>(x2 * cos_s[i] + x1 * sin_s[i]);
  }
}

}  // namespace

void rope(const Tensor& x, const Tensor& pos, const Tensor& y, const RopeFrequencies& freqs,
          bool inverse, cudaStream_t stream) {
  const int64_t tokens = x.size(0) * x.size(1), heads = x.size(2), D = x.size(3);
  if (D / 2 > kMaxHalf)
    throw std::invalid_argument("[rope] head dim " + std::to_string(D) +
                                " exceeds the CUDA kernel's maximum of " +
                                std::to_string(2 * kMaxHalf));
  InvFreq inv_freq{};
  std::copy(freqs.inv_freq.begin(), freqs.inv_freq.end(), inv_freq.v);
  const bool pos64 = pos.dtype() == DType::i64;
  visit_floating(x.dtype(), "rope", [&](auto tag) {
    using T = decltype(tag);
    launch(rope_kernel<T>, static_cast<unsigned>(tokens), kThreads, 0, stream,
           static_cast<const T*>(x.data_ptr()), pos.data_ptr(), pos64,
           static_cast<T*>(y.data_ptr()), heads, static_cast<int>(D / 2), inv_freq,
           freqs.attention_scaling, inverse);
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sprig::cuda
