// CUDA reductions over one dimension (sum, mean, max, logsumexp), argmax, softmax / log_softmax
// and softmax_backward: twins of tensor/cpu/reduce.cpp (same contracts and edge rules).
//
// Layout: contiguous tensors viewed as [outer, n, inner] around the reduced dim. Each
// (outer, inner) pair is a line of n elements spaced `inner` apart, line l starting at
// (l / inner) * n * inner + l % inner; reductions write out[l].
// Teams: when inner == 1 (the last dim) one block owns a line (a single warp when n <= 32) and
// combines its threads' partial results with block_sum / block_max / block_argmax; otherwise a
// thread owns a line (adjacent threads read adjacent addresses). Every kernel is written once
// over the team type.
// Math: float for f32/bf16/f16, double for f64. Maxima ignore NaN and pick the first maximum; a
// line of all -inf has logsumexp -inf, softmax 0 and log_softmax -inf.
// Backward rule: softmax_backward writes (`=`) the activation gradient dx.
#include <algorithm>

#include "tensor/cuda/common.cuh"

namespace sprig::cuda {

namespace {

constexpr int kThreads = 256;         // per block, for thread-per-line kernels
constexpr int kMaxLineThreads = 512;  // per block, for block-per-line kernels

struct Lines {
  int64_t count = 1, n = 1, inner = 1;
  __device__ int64_t start(int64_t line) const { return (line / inner) * n * inner + line % inner; }
};

Lines lines_of(const Shape& shape, int64_t dim) {
  Lines lines;
  lines.n = shape[dim];
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
    if (d != dim) lines.count *= shape[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d) lines.inner *= shape[d];
  return lines;
}

// Element k of a line is at p[k * stride].
template <class T> struct Line {
  T* p;
  int64_t stride;
  __device__ T& operator[](int64_t k) const { return p[k * stride]; }
};

// (value, index) pairs: the larger value wins, ties go to the smaller index.
template <class C> __device__ __forceinline__ void keep_better(C& v, int64_t& i, C ov, int64_t oi) {
  if (ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

template <class C> __device__ void block_argmax(C& v, int64_t& i) {
  __shared__ C values[32];
  __shared__ int64_t indices[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1)
    keep_better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
  __syncthreads();
  if (lane == 0) {
    values[warp] = v;
    indices[warp] = i;
  }
  __syncthreads();
  const int nwarps = blockDim.x >> 5;
  v = lane < nwarps ? values[lane] : C(-INFINITY);
  i = lane < nwarps ? indices[lane] : 0;
  for (int o = 16; o > 0; o >>= 1)
    keep_better(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
}

// The threads of a block share line blockIdx.x; results of sum/max are block-wide.
struct BlockTeam {
  __device__ int64_t line() const { return blockIdx.x; }
  __device__ int first() const { return threadIdx.x; }
  __device__ int step() const { return blockDim.x; }
  template <class C> __device__ C sum(C v) const { return block_sum(v); }
  template <class C> __device__ C max(C v) const { return block_max(v); }
  template <class C> __device__ void argmax(C& v, int64_t& i) const { block_argmax(v, i); }
};

// One thread owns a whole line: its partial results are final.
struct ThreadTeam {
  __device__ int64_t line() const { return blockIdx.x * int64_t(blockDim.x) + threadIdx.x; }
  __device__ int first() const { return 0; }
  __device__ int step() const { return 1; }
  template <class C> __device__ C sum(C v) const { return v; }
  template <class C> __device__ C max(C v) const { return v; }
  template <class C> __device__ void argmax(C&, int64_t&) const {}
};

template <class Team, class T> __device__ acc_t<T> line_max(Team team, Line<const T> x, int64_t n) {
  acc_t<T> m = -INFINITY;
  for (int64_t k = team.first(); k < n; k += team.step()) {
    const acc_t<T> v = to_acc(x[k]);
    if (v > m) m = v;
  }
  return team.max(m);
}

template <class Team, class T> __device__ acc_t<T> line_sum(Team team, Line<const T> x, int64_t n) {
  acc_t<T> s = 0;
  for (int64_t k = team.first(); k < n; k += team.step()) s += to_acc(x[k]);
  return team.sum(s);
}

// sum(exp(x - m)) over the line.
template <class Team, class T>
__device__ acc_t<T> line_sum_exp(Team team, Line<const T> x, int64_t n, acc_t<T> m) {
  acc_t<T> s = 0;
  for (int64_t k = team.first(); k < n; k += team.step()) s += ::exp(to_acc(x[k]) - m);
  return team.sum(s);
}

template <class Team, class T>
__global__ void reduce_kernel(ReduceOp op, const T* x, T* out, Lines lines) {
  using C = acc_t<T>;
  const Team team;
  const int64_t l = team.line();
  if (l >= lines.count) return;
  const Line<const T> xl{x + lines.start(l), lines.inner};
  C r;
  if (op == ReduceOp::sum || op == ReduceOp::mean) {
    r = line_sum(team, xl, lines.n);
    if (op == ReduceOp::mean) r /= C(lines.n);
  } else {
    r = line_max(team, xl, lines.n);
    // Infinite maxima (all -inf, or a +inf) are the logsumexp itself.
    if (op == ReduceOp::logsumexp && !isinf(r)) r += ::log(line_sum_exp(team, xl, lines.n, r));
  }
  if (team.first() == 0) out[l] = from_acc<T>(r);
}

template <class Team, class T>
__global__ void argmax_kernel(const T* x, int64_t* out, Lines lines) {
  using C = acc_t<T>;
  const Team team;
  const int64_t l = team.line();
  if (l >= lines.count) return;
  const Line<const T> xl{x + lines.start(l), lines.inner};
  C best = -INFINITY;
  int64_t index = 0;
  for (int64_t k = team.first(); k < lines.n; k += team.step()) {
    const C v = to_acc(xl[k]);
    if (v > best) {
      best = v;
      index = k;
    }
  }
  team.argmax(best, index);
  if (team.first() == 0) out[l] = index;
}

template <class Team, class T>
__global__ void softmax_kernel(const T* x, T* y, Lines lines, bool log_softmax) {
  using C = acc_t<T>;
  const Team team;
  const int64_t l = team.line();
  if (l >= lines.count) return;
  const Line<const T> xl{x + lines.start(l), lines.inner};
  const Line<T> yl{y + lines.start(l), lines.inner};
  const C m = line_max(team, xl, lines.n);
  if (m == C(-INFINITY)) {  // nothing to normalise: every probability is 0
    for (int64_t k = team.first(); k < lines.n; k += team.step())
      yl[k] = from_acc<T>(log_softmax ? C(-INFINITY) : C(0));
    return;
  }
  const C s = line_sum_exp(team, xl, lines.n, m);
  const C shift = m + ::log(s), inv = C(1) / s;
  for (int64_t k = team.first(); k < lines.n; k += team.step()) {
    const C v = to_acc(xl[k]);
    yl[k] = from_acc<T>(log_softmax ? v - shift : ::exp(v - m) * inv);
  }
}

// softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy).
template <class Team, class T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, Lines lines,
                                        bool log_softmax) {
  using C = acc_t<T>;
  const Team team;
  const int64_t l = team.line();
  if (l >= lines.count) return;
  const int64_t start = lines.start(l);
  const Line<const T> yl{y + start, lines.inner}, dyl{dy + start, lines.inner};
  const Line<T> dxl{dx + start, lines.inner};
  C s = 0;
  for (int64_t k = team.first(); k < lines.n; k += team.step()) {
    const C g = to_acc(dyl[k]);
    s += log_softmax ? g : g * to_acc(yl[k]);
  }
  s = team.sum(s);
  for (int64_t k = team.first(); k < lines.n; k += team.step()) {
    const C v = to_acc(yl[k]), g = to_acc(dyl[k]);
    dxl[k] = from_acc<T>(log_softmax ? g - ::exp(v) * s : v * (g - s));
  }
}

template <class T> T* ptr(const Tensor& t) { return static_cast<T*>(t.data_ptr()); }

// Calls run(team, grid, block) with the team and launch shape for `lines`: a block per line
// (threads rounded up to whole warps) for the last dim, else a thread per line.
template <class F> void launch_lines(const Lines& lines, F&& run) {
  if (lines.count == 0) return;
  if (lines.inner == 1) {
    const int64_t warps = std::min<int64_t>((lines.n + 31) / 32, kMaxLineThreads / 32);
    run(BlockTeam{}, dim3(static_cast<unsigned>(lines.count)),
        dim3(static_cast<unsigned>(std::max<int64_t>(warps, 1) * 32)));
  } else {
    run(ThreadTeam{}, dim3(static_cast<unsigned>((lines.count + kThreads - 1) / kThreads)),
        dim3(kThreads));
  }
}

}  // namespace

void reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t dim, cudaStream_t stream) {
  visit_floating(x.dtype(), "reduce", [&](auto tag) {
    using T = decltype(tag);
    const Lines lines = lines_of(x.shape(), dim);
    launch_lines(lines, [&](auto team, dim3 grid, dim3 block) {
      launch(reduce_kernel<decltype(team), T>, grid, block, 0, stream, op, ptr<T>(x), ptr<T>(out),
             lines);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void argmax(const Tensor& x, const Tensor& out, int64_t dim, cudaStream_t stream) {
  visit_floating(x.dtype(), "argmax", [&](auto tag) {
    using T = decltype(tag);
    const Lines lines = lines_of(x.shape(), dim);
    launch_lines(lines, [&](auto team, dim3 grid, dim3 block) {
      launch(argmax_kernel<decltype(team), T>, grid, block, 0, stream, ptr<T>(x), ptr<int64_t>(out),
             lines);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void softmax(const Tensor& x, const Tensor& y, int64_t dim, bool log, cudaStream_t stream) {
  visit_floating(x.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const Lines lines = lines_of(x.shape(), dim);
    launch_lines(lines, [&](auto team, dim3 grid, dim3 block) {
      launch(softmax_kernel<decltype(team), T>, grid, block, 0, stream, ptr<T>(x), ptr<T>(y), lines,
             log);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int64_t dim, bool log,
                      cudaStream_t stream) {
  visit_floating(y.dtype(), log ? "log_softmax_backward" : "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const Lines lines = lines_of(y.shape(), dim);
    launch_lines(lines, [&](auto team, dim3 grid, dim3 block) {
      launch(softmax_backward_kernel<decltype(team), T>, grid, block, 0, stream, ptr<T>(y),
             ptr<T>(dy), ptr<T>(dx), lines, log);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sprig::cuda
