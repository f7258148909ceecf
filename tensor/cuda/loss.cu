// CUDA cross-entropy and forward KL over rows of logits, forward and backward (twin of
// tensor/cpu/loss.cpp).
// Layout: logits / teacher / student / gradients [R, V] contiguous, read in their own dtype (bf16
// directly, never an f32 copy) with A = acc_t<T> math; targets [R] i32/i64; per-row outputs [R]
// in A. One block per row (row_threads: more threads at large V), 16-byte vector accesses when rows
// stay aligned. Cross-entropy reads its row once (online max / sum-exp and the first argmax); KL
// reads both rows twice (both lses, then the CPU's per-term sum, which stays accurate when the
// distributions are close).
// Backward rule: `=` into the logits gradients.
#include <type_traits>

#include "tensor/cuda/common.cuh"

namespace sprig::cuda {

namespace {

constexpr int kMinThreads = 256;  // per block (a row)
constexpr int64_t kMinVectorsPerThread = 8;
// The most threads per row: 1024, but 256 for f64 (gradient checks), whose kernels would spill in
// the 64 registers a 1024-thread block leaves each thread. The kernels' launch bounds say so, with
// one block per SM as the only occupancy demand (anything more made ptxas spill f64 kernels).
template <class T> constexpr int kMaxThreads = std::is_same_v<T, double> ? kMinThreads : 1024;

// Threads per row for rows of V elements read N at a time: 256, doubled up to kMaxThreads while
// every thread still reads at least 8 vectors (for bf16, 512 threads from V = 32768 and 1024 from
// V = 65536), so large vocabularies keep more loads in flight per row.
template <class T> int row_threads(int64_t V, int N) {
  int threads = kMinThreads;
  while (threads < kMaxThreads<T> && V / N >= 2 * threads * kMinVectorsPerThread) threads *= 2;
  return threads;
}

constexpr int64_t kNoIndex = INT64_MAX;

// Running log-sum-exp state: the max so far and the sum of exp(v - max).
template <class A> struct MaxSum { A max, sum; };
// Running first maximum: value and index (kNoIndex before any element).
template <class A> struct ArgMax {
  A value;
  int64_t index;
};

template <class A> __device__ void add(MaxSum<A>& st, A v) {
  if (v > st.max) {
    st.sum = st.sum * ::exp(st.max - v) + A(1);
    st.max = v;
  } else if (v != -INFINITY) {
    st.sum += ::exp(v - st.max);
  }
}
template <class A> __device__ MaxSum<A> combine(MaxSum<A> a, MaxSum<A> b) {
  const A m = a.max > b.max ? a.max : b.max;
  if (m == -INFINITY) return {m, A(0)};
  return {m, a.sum * ::exp(a.max - m) + b.sum * ::exp(b.max - m)};
}
template <class A> __device__ ArgMax<A> combine(ArgMax<A> a, ArgMax<A> b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index) ? a : b;
}

// __shfl_xor_sync of a trivially copyable struct, word by word.
template <class S> __device__ S shfl_xor(S v, int offset) {
  static_assert(sizeof(S) % sizeof(int) == 0);
  int words[sizeof(S) / sizeof(int)];
  memcpy(words, &v, sizeof(S));
  for (int& w : words) w = __shfl_xor_sync(0xffffffffu, w, offset);
  memcpy(&v, words, sizeof(S));
  return v;
}

// Combines one state per thread over the block (blockDim.x a multiple of 32) in a fixed order;
// every thread gets the result.
template <class S> __device__ S block_combine(S v) {
  __shared__ S partial[32];
  for (int o = 16; o > 0; o >>= 1) v = combine(v, shfl_xor(v, o));
  __syncthreads();  // a previous call may still be reading `partial`
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
  __syncthreads();
  v = partial[0];
  for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) v = combine(v, partial[w]);
  return v;
}

__device__ __forceinline__ int64_t load_index(const void* p, bool is64, int64_t i) {
  return is64 ? static_cast<const int64_t*>(p)[i] : static_cast<const int32_t*>(p)[i];
}

// ---- cross-entropy ------------------------------------------------------------------------------

template <class T, int N>
__global__ void __launch_bounds__(kMaxThreads<T>, 1)
    cross_entropy_kernel(const T* __restrict__ logits, const void* __restrict__ targets,
                         bool targets64, acc_t<T>* __restrict__ loss, acc_t<T>* __restrict__ lse,
                         int64_t* __restrict__ argmax, int64_t V, int64_t ignore_index) {
  using A = acc_t<T>;
  const T* row = logits + blockIdx.x * V;
  MaxSum<A> st{-INFINITY, A(0)};
  ArgMax<A> best{-INFINITY, kNoIndex};
  for (int64_t p = threadIdx.x; p < V / N; p += blockDim.x) {
    const Vec<T, N> x = reinterpret_cast<const Vec<T, N>*>(row)[p];
    for (int j = 0; j < N; ++j) {
      const A v = to_acc(x.v[j]);
      add(st, v);
      if (v > best.value || best.index == kNoIndex) best = {v, p * N + j};
    }
  }
  st = block_combine(st);
  if (argmax) best = block_combine(best);  // argmax is the same for the whole block
  if (threadIdx.x != 0) return;
  const A l = st.max + ::log(st.sum);
  const int64_t t = load_index(targets, targets64, blockIdx.x);
  lse[blockIdx.x] = l;
  loss[blockIdx.x] = t == ignore_index ? A(0) : l - to_acc(row[t]);
  if (argmax) argmax[blockIdx.x] = best.index;
}

// dlogits = dloss * (softmax - onehot(target)); ignored rows get 0. dlogits may be logits: each
// thread reads a vector of logits before it writes the same vector (so neither is __restrict__).
template <class T, int N>
__global__ void __launch_bounds__(kMaxThreads<T>, 1)
    cross_entropy_backward_kernel(const acc_t<T>* __restrict__ dloss, const T* logits,
                                  const void* __restrict__ targets, bool targets64,
                                  const acc_t<T>* __restrict__ lse, T* dlogits, int64_t V,
                                  int64_t ignore_index) {
  using A = acc_t<T>;
  const int64_t t = load_index(targets, targets64, blockIdx.x);
  // An ignored row's gradient is exactly 0, as on the CPU: never 0 * (exp(x - lse) - onehot),
  // which is NaN where a logit or the lse is not finite.
  const bool ignored = t == ignore_index;
  const A g = ignored ? A(0) : dloss[blockIdx.x], l = lse[blockIdx.x];
  const Vec<T, N>* in = reinterpret_cast<const Vec<T, N>*>(logits + blockIdx.x * V);
  Vec<T, N>* out = reinterpret_cast<Vec<T, N>*>(dlogits + blockIdx.x * V);
  for (int64_t p = threadIdx.x; p < V / N; p += blockDim.x) {
    const Vec<T, N> x = in[p];
    Vec<T, N> d;
    for (int j = 0; j < N; ++j) {
      const A onehot = p * N + j == t ? A(1) : A(0);
      d.v[j] = from_acc<T>(ignored ? A(0) : g * (::exp(to_acc(x.v[j]) - l) - onehot));
    }
    out[p] = d;
  }
}

// ---- Domino's pair: base and corrected logits
// -----------------------------------------------------

// c = b + d rounded to T, as the sum stored in place would be.
template <class T> __device__ __forceinline__ acc_t<T> corrected(T b, T d) {
  return to_acc(from_acc<T>(to_acc(b) + to_acc(d)));
}

// Both cross-entropies of a row from one read of b and d: loss, lse, argmax at [i * R + row], i = 0
// for b and 1 for c.
template <class T, int N>
__global__ void __launch_bounds__(kMaxThreads<T>, 1)
    corrected_cross_entropy_kernel(const T* __restrict__ base, const T* __restrict__ delta,
                                   const void* __restrict__ targets, bool targets64,
                                   acc_t<T>* __restrict__ loss, acc_t<T>* __restrict__ lse,
                                   int64_t* __restrict__ argmax, int64_t R, int64_t V,
                                   int64_t ignore_index) {
  using A = acc_t<T>;
  const int64_t row = blockIdx.x;
  const Vec<T, N>* b_row = reinterpret_cast<const Vec<T, N>*>(base + row * V);
  const Vec<T, N>* d_row = reinterpret_cast<const Vec<T, N>*>(delta + row * V);
  MaxSum<A> st[2] = {{-INFINITY, A(0)}, {-INFINITY, A(0)}};
  ArgMax<A> best[2] = {{-INFINITY, kNoIndex}, {-INFINITY, kNoIndex}};
  for (int64_t p = threadIdx.x; p < V / N; p += blockDim.x) {
    const Vec<T, N> x = b_row[p], y = d_row[p];
    for (int j = 0; j < N; ++j) {
      const A v[2] = {to_acc(x.v[j]), corrected(x.v[j], y.v[j])};
      for (int i = 0; i < 2; ++i) {
        add(st[i], v[i]);
        if (v[i] > best[i].value || best[i].index == kNoIndex) best[i] = {v[i], p * N + j};
      }
    }
  }
  for (int i = 0; i < 2; ++i) {
    st[i] = block_combine(st[i]);
    if (argmax) best[i] = block_combine(best[i]);
  }
  if (threadIdx.x != 0) return;
  const int64_t t = load_index(targets, targets64, row);
  for (int i = 0; i < 2; ++i) {
    const A l = st[i].max + ::log(st[i].sum);
    const A at_target = t == ignore_index ? A(0)
                        : i == 0          ? to_acc(base[row * V + t])
                                          : corrected(base[row * V + t], delta[row * V + t]);
    lse[i * R + row] = l;
    loss[i * R + row] = t == ignore_index ? A(0) : l - at_target;
    if (argmax) argmax[i * R + row] = best[i].index;
  }
}

// ddelta = g1 (softmax(c) - onehot), dbase = g0 (softmax(b) - onehot) + ddelta. Each thread reads
// its elements of b and d before writing the same elements of dbase and ddelta, so the outputs may
// be the inputs (no __restrict__).
template <class T, int N>
__global__ void __launch_bounds__(kMaxThreads<T>, 1)
    corrected_cross_entropy_backward_kernel(const acc_t<T>* __restrict__ dloss, const T* base,
                                            const T* delta, const void* __restrict__ targets,
                                            bool targets64, const acc_t<T>* __restrict__ lse,
                                            T* dbase, T* ddelta, int64_t R, int64_t V,
                                            int64_t ignore_index) {
  using A = acc_t<T>;
  const int64_t row = blockIdx.x;
  const int64_t t = load_index(targets, targets64, row);
  const bool ignored = t == ignore_index;
  const A g0 = ignored ? A(0) : dloss[row], g1 = ignored ? A(0) : dloss[R + row];
  const A l0 = lse[row], l1 = lse[R + row];
  const Vec<T, N>* b_row = reinterpret_cast<const Vec<T, N>*>(base + row * V);
  const Vec<T, N>* d_row = reinterpret_cast<const Vec<T, N>*>(delta + row * V);
  Vec<T, N>* gb_row = reinterpret_cast<Vec<T, N>*>(dbase + row * V);
  Vec<T, N>* gd_row = reinterpret_cast<Vec<T, N>*>(ddelta + row * V);
  for (int64_t p = threadIdx.x; p < V / N; p += blockDim.x) {
    const Vec<T, N> x = b_row[p], y = d_row[p];
    Vec<T, N> gb, gd;
    for (int j = 0; j < N; ++j) {
      const A onehot = p * N + j == t ? A(1) : A(0);
      const A dc = ignored ? A(0) : g1 * (::exp(corrected(x.v[j], y.v[j]) - l1) - onehot);
      const A db = ignored ? A(0) : g0 * (::exp(to_acc(x.v[j]) - l0) - onehot) + dc;
      gb.v[j] = from_acc<T>(db);
      gd.v[j] = from_acc<T>(dc);
    }
    gb_row[p] = gb;
    gd_row[p] = gd;
  }
}

// ---- KL divergence ------------------------------------------------------------------------------

// kl = sum_v p (log p - log q), p = softmax(teacher / temp), q = softmax(student / temp); terms
// with p == 0 contribute 0. Row r's teacher is row teacher_rows[r] (or r without them); with
// argmax, the student row's first maximum.
template <class T, int N>
__global__ void __launch_bounds__(kMaxThreads<T>, 1)
    kl_div_kernel(const T* __restrict__ teacher, const T* __restrict__ student,
                  const void* __restrict__ teacher_rows, bool rows64, acc_t<T>* __restrict__ kl,
                  acc_t<T>* __restrict__ teacher_lse, acc_t<T>* __restrict__ student_lse,
                  int64_t* __restrict__ argmax, int64_t V, acc_t<T> temp) {
  using A = acc_t<T>;
  const int64_t t_row_index =
      teacher_rows ? load_index(teacher_rows, rows64, blockIdx.x) : int64_t{blockIdx.x};
  const Vec<T, N>* t_row = reinterpret_cast<const Vec<T, N>*>(teacher + t_row_index * V);
  const Vec<T, N>* s_row = reinterpret_cast<const Vec<T, N>*>(student + blockIdx.x * V);
  MaxSum<A> t_st{-INFINITY, A(0)}, s_st{-INFINITY, A(0)};
  ArgMax<A> best{-INFINITY, kNoIndex};
  for (int64_t p = threadIdx.x; p < V / N; p += blockDim.x) {
    const Vec<T, N> a = t_row[p], b = s_row[p];
    for (int j = 0; j < N; ++j) {
      const A x = to_acc(b.v[j]);
      add(t_st, to_acc(a.v[j]) / temp);
      add(s_st, x / temp);
      if (x > best.value || best.index == kNoIndex) best = {x, p * N + j};
    }
  }
  t_st = block_combine(t_st);
  s_st = block_combine(s_st);
  if (argmax) best = block_combine(best);  // argmax is the same for the whole block
  const A t_lse = t_st.max + ::log(t_st.sum), s_lse = s_st.max + ::log(s_st.sum);
  A sum = 0;
  for (int64_t p = threadIdx.x; p < V / N; p += blockDim.x) {
    const Vec<T, N> a = t_row[p], b = s_row[p];
    for (int j = 0; j < N; ++j) {
      const A log_p = to_acc(a.v[j]) / temp - t_lse, prob = ::exp(log_p);
      if (prob > A(0)) sum += prob * (log_p - (to_acc(b.v[j]) / temp - s_lse));
    }
  }
  sum = block_sum(sum);
  if (threadIdx.x != 0) return;
  kl[blockIdx.x] = sum;
  teacher_lse[blockIdx.x] = t_lse;
  student_lse[blockIdx.x] = s_lse;
  if (argmax) argmax[blockIdx.x] = best.index;
}

// dstudent = dkl * (q - p) / temp.
template <class T, int N>
__global__ void __launch_bounds__(kMaxThreads<T>, 1)
    kl_div_backward_kernel(const acc_t<T>* __restrict__ dkl, const T* __restrict__ teacher,
                           const T* __restrict__ student, const void* __restrict__ teacher_rows,
                           bool rows64, const acc_t<T>* __restrict__ teacher_lse,
                           const acc_t<T>* __restrict__ student_lse, T* __restrict__ dstudent,
                           int64_t V, acc_t<T> temp) {
  using A = acc_t<T>;
  const A scale = dkl[blockIdx.x] / temp, t_lse = teacher_lse[blockIdx.x];
  const A s_lse = student_lse[blockIdx.x];
  const int64_t t_row_index =
      teacher_rows ? load_index(teacher_rows, rows64, blockIdx.x) : int64_t{blockIdx.x};
  const Vec<T, N>* t_row = reinterpret_cast<const Vec<T, N>*>(teacher + t_row_index * V);
  const Vec<T, N>* s_row = reinterpret_cast<const Vec<T, N>*>(student + blockIdx.x * V);
  Vec<T, N>* out = reinterpret_cast<Vec<T, N>*>(dstudent + blockIdx.x * V);
  for (int64_t p = threadIdx.x; p < V / N; p += blockDim.x) {
    const Vec<T, N> a = t_row[p], b = s_row[p];
    Vec<T, N> d;
    for (int j = 0; j < N; ++j) {
      const A prob_p = ::exp(to_acc(a.v[j]) / temp - t_lse);
      const A prob_q = ::exp(to_acc(b.v[j]) / temp - s_lse);
      d.v[j] = from_acc<T>(scale * (prob_q - prob_p));
    }
    out[p] = d;
  }
}

}  // namespace

void cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& loss,
                   const Tensor& lse, const Tensor& argmax, int64_t ignore_index,
                   cudaStream_t stream) {
  const int64_t R = logits.size(0), V = logits.size(1);
  visit_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* lp = static_cast<const T*>(logits.data_ptr());
    int64_t* ap = argmax.defined() ? static_cast<int64_t*>(argmax.data_ptr()) : nullptr;
    with_vec_width<T>(V, {lp}, [&](auto width) {
      constexpr int N = decltype(width)::value;
      launch(cross_entropy_kernel<T, N>, static_cast<unsigned>(R), row_threads<T>(V, N), 0, stream,
             lp, targets.data_ptr(), targets.dtype() == DType::i64,
             static_cast<A*>(loss.data_ptr()), static_cast<A*>(lse.data_ptr()), ap, V,
             ignore_index);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, const Tensor& dlogits, int64_t ignore_index,
                            cudaStream_t stream) {
  const int64_t R = logits.size(0), V = logits.size(1);
  visit_floating(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* lp = static_cast<const T*>(logits.data_ptr());
    T* dp = static_cast<T*>(dlogits.data_ptr());
    with_vec_width<T>(V, {lp, dp}, [&](auto width) {
      constexpr int N = decltype(width)::value;
      launch(cross_entropy_backward_kernel<T, N>, static_cast<unsigned>(R), row_threads<T>(V, N), 0,
             stream, static_cast<const A*>(dloss.data_ptr()), lp, targets.data_ptr(),
             targets.dtype() == DType::i64, static_cast<const A*>(lse.data_ptr()), dp, V,
             ignore_index);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

namespace {

void launch_corrected_cross_entropy(const Tensor& base, const Tensor& delta, const Tensor& targets,
                                    const Tensor& loss, const Tensor& lse, const Tensor& argmax,
                                    int64_t ignore_index, cudaStream_t stream) {
  const int64_t R = base.size(0), V = base.size(1);
  visit_floating(base.dtype(), "corrected_cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* bp = static_cast<const T*>(base.data_ptr());
    const T* dp = static_cast<const T*>(delta.data_ptr());
    int64_t* ap = argmax.defined() ? static_cast<int64_t*>(argmax.data_ptr()) : nullptr;
    with_vec_width<T>(V, {bp, dp}, [&](auto width) {
      constexpr int N = decltype(width)::value;
      launch(corrected_cross_entropy_kernel<T, N>, static_cast<unsigned>(R), row_threads<T>(V, N),
             0, stream, bp, dp, targets.data_ptr(), targets.dtype() == DType::i64,
             static_cast<A*>(loss.data_ptr()), static_cast<A*>(lse.data_ptr()), ap, R, V,
             ignore_index);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void launch_corrected_cross_entropy_backward(const Tensor& dloss, const Tensor& base,
                                             const Tensor& delta, const Tensor& targets,
                                             const Tensor& lse, const Tensor& dbase,
                                             const Tensor& ddelta, int64_t ignore_index,
                                             cudaStream_t stream) {
  const int64_t R = base.size(0), V = base.size(1);
  visit_floating(base.dtype(), "corrected_cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* bp = static_cast<const T*>(base.data_ptr());
    const T* dp = static_cast<const T*>(delta.data_ptr());
    T* gbp = static_cast<T*>(dbase.data_ptr());
    T* gdp = static_cast<T*>(ddelta.data_ptr());
    with_vec_width<T>(V, {bp, dp, gbp, gdp}, [&](auto width) {
      constexpr int N = decltype(width)::value;
      launch(corrected_cross_entropy_backward_kernel<T, N>, static_cast<unsigned>(R),
             row_threads<T>(V, N), 0, stream, static_cast<const A*>(dloss.data_ptr()), bp, dp,
             targets.data_ptr(), targets.dtype() == DType::i64,
             static_cast<const A*>(lse.data_ptr()), gbp, gdp, R, V, ignore_index);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

// The corrections delta [R, V] = features @ proj^T, one GEMM into a scratch buffer.
Tensor corrections(const Tensor& features, const Tensor& proj, cudaStream_t stream) {
  const int64_t R = features.size(0), V = proj.size(0), E = features.size(1);
  Tensor delta = scratch_tensor("corrected_cross_entropy", {R, V}, features.dtype(),
                                features.device(), stream);
  matmul(features.view({1, R, E}), proj.view({1, V, E}), delta.view({1, R, V}), false, true, false,
         stream);
  return delta;
}

}  // namespace

void corrected_cross_entropy(const Tensor& base, const Tensor& features, const Tensor& proj,
                             const Tensor& targets, const Tensor& loss, const Tensor& lse,
                             const Tensor& argmax, int64_t ignore_index, cudaStream_t stream) {
  launch_corrected_cross_entropy(base, corrections(features, proj, stream), targets, loss, lse,
                                 argmax, ignore_index, stream);
}

// ddelta replaces the corrections in their buffer; dfeatures = ddelta @ proj and
// dproj (+)= ddelta^T @ features are two GEMMs.
void corrected_cross_entropy_backward(const Tensor& dloss, const Tensor& base,
                                      const Tensor& features, const Tensor& proj,
                                      const Tensor& targets, const Tensor& lse, const Tensor& dbase,
                                      const Tensor& dfeatures, const Tensor& dproj,
                                      bool accumulate_dproj, int64_t ignore_index,
                                      cudaStream_t stream) {
  const int64_t R = base.size(0), V = base.size(1), E = features.size(1);
  const Tensor delta = corrections(features, proj, stream);
  launch_corrected_cross_entropy_backward(dloss, base, delta, targets, lse, dbase, delta,
                                          ignore_index, stream);
  matmul(delta.view({1, R, V}), proj.view({1, V, E}), dfeatures.view({1, R, E}), false, false,
         false, stream);
  if (dproj.defined())
    matmul(delta.view({1, R, V}), features.view({1, R, E}), dproj.view({1, V, E}), true, false,
           accumulate_dproj, stream);
}

void kl_div(const Tensor& teacher, const Tensor& student, const Tensor& teacher_rows,
            const Tensor& kl, const Tensor& teacher_lse, const Tensor& student_lse,
            const Tensor& student_argmax, double temperature, cudaStream_t stream) {
  const int64_t R = student.size(0), V = student.size(1);
  visit_floating(teacher.dtype(), "kl_div", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* tp = static_cast<const T*>(teacher.data_ptr());
    const T* sp = static_cast<const T*>(student.data_ptr());
    int64_t* ap =
        student_argmax.defined() ? static_cast<int64_t*>(student_argmax.data_ptr()) : nullptr;
    with_vec_width<T>(V, {tp, sp}, [&](auto width) {
      constexpr int N = decltype(width)::value;
      launch(kl_div_kernel<T, N>, static_cast<unsigned>(R), row_threads<T>(V, N), 0, stream, tp, sp,
             teacher_rows.defined() ? teacher_rows.data_ptr() : nullptr,
             teacher_rows.defined() && teacher_rows.dtype() == DType::i64,
             static_cast<A*>(kl.data_ptr()), static_cast<A*>(teacher_lse.data_ptr()),
             static_cast<A*>(student_lse.data_ptr()), ap, V, A(temperature));
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void kl_div_backward(const Tensor& dkl, const Tensor& teacher, const Tensor& student,
                     const Tensor& teacher_rows, const Tensor& teacher_lse,
                     const Tensor& student_lse, const Tensor& dstudent, double temperature,
                     cudaStream_t stream) {
  const int64_t R = student.size(0), V = student.size(1);
  visit_floating(teacher.dtype(), "kl_div_backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const T* tp = static_cast<const T*>(teacher.data_ptr());
    const T* sp = static_cast<const T*>(student.data_ptr());
    T* dp = static_cast<T*>(dstudent.data_ptr());
    with_vec_width<T>(V, {tp, sp, dp}, [&](auto width) {
      constexpr int N = decltype(width)::value;
      launch(kl_div_backward_kernel<T, N>, static_cast<unsigned>(R), row_threads<T>(V, N), 0,
             stream, static_cast<const A*>(dkl.data_ptr()), tp, sp,
             teacher_rows.defined() ? teacher_rows.data_ptr() : nullptr,
             teacher_rows.defined() && teacher_rows.dtype() == DType::i64,
             static_cast<const A*>(teacher_lse.data_ptr()),
             static_cast<const A*>(student_lse.data_ptr()), dp, V, A(temperature));
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sprig::cuda
