// CUDA reductions over one dimension (sum, mean, max, logsumexp), argmax, softmax / log_softmax
// and softmax_backward: twins of tensor/cpu/reduce.cpp (same contracts and edge rules).
//
// Layout: contiguous tensors viewed as [outer, n, inner] around the reduced dim. Each
// (outer, inner) pair is a line of n elements spaced `inner` apart, line l starting at
// (l / inner) * n * inner + l % inner; reductions write out[l].
// Teams (every kernel is written once over the team type):
// - the last dim (inner == 1): one block owns a line (a single warp when n <= 32, at most 512
//   threads) and combines its threads' partial results with block_sum / block_max / block_argmax;
// - other dims: Y threads share a line, threads_per_line() picks Y. Y starts at 1 and doubles
//   while lines * Y < 2^18 (the threads that keep an H200 busy: 132 SMs hold 270k), each of the 2Y
//   threads would still take at least 16 elements, and a block of X * 2Y threads fits in 1024,
//   X = min(32, lines rounded up to a power of two). Y = 1 is the ThreadTeam: a thread owns a line,
//   for enough lines or short ones. Y > 1 is the SplitTeam: a block of X lines (threadIdx.x,
//   adjacent threads on adjacent lines, so a warp reads adjacent addresses) by Y threads
//   (threadIdx.y; thread y takes elements y, y + Y, ...), X widened to 32 / Y when smaller, so
//   blocks are whole warps. Partial results combine in a fixed order (a butterfly over the lanes of
//   a warp on one line, then the warps in order), so results are deterministic; ties of argmax go
//   to the smaller index whatever the order. A reduction over a non-last dim of few long lines,
//   e.g. [100000, 4] over dim 0, thus runs 256 threads per line instead of one.
// Math: float for f32/bf16/f16, double for f64. Maxima ignore NaN and pick the first maximum; a
// line of all -inf has logsumexp -inf, softmax 0 and log_softmax -inf.
// Backward rule: softmax_backward writes (`=`) the activation gradient dx.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tensor/cuda/common.cuh"

namespace sprig::cuda {

namespace {

constexpr int kThreads = 256;           // per block, for thread-per-line kernels
constexpr int kMaxLineThreads = 512;    // per block, for block-per-line kernels
constexpr int kMaxSplitThreads = 1024;  // per block, for split lines (and every kernel's bound)
constexpr int64_t kFillThreads = int64_t{1} << 18;  // threads that keep the GPU busy
constexpr int64_t kMinSplitElements = 16;           // per thread of a split line, at least

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

// Lines per block of a split team before widening: min(32, count rounded up to a power of two).
int split_lanes(int64_t count) {
  int x = 1;
  while (x < 32 && x < count) x *= 2;
  return x;
}

// Threads per line for a reduction over a non-last dim (the rule of the header comment).
int threads_per_line(const Lines& lines) {
  const int lanes = split_lanes(lines.count);
  int y = 1;
  while (lines.count * y < kFillThreads && lines.n >= 2 * y * kMinSplitElements &&
         lanes * 2 * y <= kMaxSplitThreads)
    y *= 2;
  return y;
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

// The combinations of a split team's partial results, and the shuffle of each kind of value.
template <class C> struct Best {
  C value;
  int64_t index;
};
struct Add {
  template <class C> __device__ C operator()(C a, C b) const { return a + b; }
};
struct Larger {  // partial maxima are never NaN
  template <class C> __device__ C operator()(C a, C b) const { return b > a ? b : a; }
};
struct Better {
  template <class C> __device__ Best<C> operator()(Best<C> a, Best<C> b) const {
    keep_better(a.value, a.index, b.value, b.index);
    return a;
  }
};
template <class C> __device__ C shfl_xor(C v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
template <class C> __device__ Best<C> shfl_xor(Best<C> b, int o) {
  return {shfl_xor(b.value, o), shfl_xor(b.index, o)};
}

// Dynamic shared memory of a split team's block: a value per warp and line.
template <class C> size_t split_smem(dim3 block) {
  return size_t(block.x) * (block.x * block.y / 32) * sizeof(Best<C>);
}

// Combines the values of the blockDim.y threads of each line (those of one threadIdx.x) with f in
// a fixed order, and gives every thread its line's result: a butterfly over the lanes of a warp
// that share the line (when blockDim.x < 32), then the warps in order, through shared memory
// (split_smem). blockDim.x is a power of two <= 32 and blockDim.x * blockDim.y a multiple of 32.
template <class S, class F> __device__ S split_combine(S v, F f) {
  S* partial = reinterpret_cast<S*>(dynamic_smem());
  const int x = threadIdx.x, lanes = blockDim.x;
  const int t = x + lanes * threadIdx.y, warps = lanes * blockDim.y / 32;
  for (int o = 16; o >= lanes; o >>= 1) v = f(v, shfl_xor(v, o));  // lanes t ^ o: the same line
  __syncthreads();  // a previous call may still be reading `partial`
  if ((t & 31) < lanes) partial[(t >> 5) * lanes + x] = v;  // lane t & 31 is line x's first
  __syncthreads();
  v = partial[x];
  for (int w = 1; w < warps; ++w) v = f(v, partial[w * lanes + x]);
  return v;
}

// Where a thread of a team works: line `line`, starting at `start`, its elements k = first(),
// first() + step(), ... below `end`. A thread past the last line (not `live`) has end 0: it reads
// and writes nothing, but still reaches its team's barriers.
struct TeamLine {
  int64_t line, start, end;
  bool live;
  __device__ TeamLine(const Lines& lines, int64_t l)
      : line(l),
        start(l < lines.count ? lines.start(l) : 0),
        end(l < lines.count ? lines.n : 0),
        live(l < lines.count) {}
};

// The threads of a block share line blockIdx.x; results of sum/max are block-wide.
struct BlockTeam : TeamLine {
  __device__ explicit BlockTeam(const Lines& lines) : TeamLine(lines, blockIdx.x) {}
  __device__ int first() const { return threadIdx.x; }
  __device__ int step() const { return blockDim.x; }
  __device__ bool leader() const { return threadIdx.x == 0; }
  template <class C> __device__ C sum(C v) const { return block_sum(v); }
  template <class C> __device__ C max(C v) const { return block_max(v); }
  template <class C> __device__ void argmax(C& v, int64_t& i) const { block_argmax(v, i); }
};

// One thread owns a whole line: its partial results are final.
struct ThreadTeam : TeamLine {
  __device__ explicit ThreadTeam(const Lines& lines)
      : TeamLine(lines, blockIdx.x * int64_t(blockDim.x) + threadIdx.x) {}
  __device__ int first() const { return 0; }
  __device__ int step() const { return 1; }
  __device__ bool leader() const { return live; }
  template <class C> __device__ C sum(C v) const { return v; }
  template <class C> __device__ C max(C v) const { return v; }
  template <class C> __device__ void argmax(C&, int64_t&) const {}
};

// blockDim.y threads share line blockIdx.x * blockDim.x + threadIdx.x; results are line-wide.
struct SplitTeam : TeamLine {
  __device__ explicit SplitTeam(const Lines& lines)
      : TeamLine(lines, blockIdx.x * int64_t(blockDim.x) + threadIdx.x) {}
  __device__ int first() const { return threadIdx.y; }
  __device__ int step() const { return blockDim.y; }
  __device__ bool leader() const { return live && threadIdx.y == 0; }
  template <class C> __device__ C sum(C v) const { return split_combine(v, Add{}); }
  template <class C> __device__ C max(C v) const { return split_combine(v, Larger{}); }
  template <class C> __device__ void argmax(C& v, int64_t& i) const {
    const Best<C> b = split_combine(Best<C>{v, i}, Better{});
    v = b.value;
    i = b.index;
  }
};

// The team's reductions are barriers for the whole block (of several lines, for a SplitTeam):
// every thread calls them, whatever its line's values; only the leader writes a line's result.

template <class Team, class T> __device__ acc_t<T> line_max(const Team& team, Line<const T> x) {
  acc_t<T> m = -INFINITY;
  for (int64_t k = team.first(); k < team.end; k += team.step()) {
    const acc_t<T> v = to_acc(x[k]);
    if (v > m) m = v;
  }
  return team.max(m);
}

template <class Team, class T> __device__ acc_t<T> line_sum(const Team& team, Line<const T> x) {
  acc_t<T> s = 0;
  for (int64_t k = team.first(); k < team.end; k += team.step()) s += to_acc(x[k]);
  return team.sum(s);
}

// sum(exp(x - m)) over the line; 0 for a line of all -inf (m = -inf).
template <class Team, class T>
__device__ acc_t<T> line_sum_exp(const Team& team, Line<const T> x, acc_t<T> m) {
  acc_t<T> s = 0;
  if (m != acc_t<T>(-INFINITY))
    for (int64_t k = team.first(); k < team.end; k += team.step()) s += ::exp(to_acc(x[k]) - m);
  return team.sum(s);
}

template <class Team, class T>
__global__ void __launch_bounds__(kMaxSplitThreads)
    reduce_kernel(ReduceOp op, const T* x, T* out, Lines lines) {
  using C = acc_t<T>;
  const Team team(lines);
  const Line<const T> xl{x + team.start, lines.inner};
  C r;
  if (op == ReduceOp::sum || op == ReduceOp::mean) {
    r = line_sum(team, xl);
    if (op == ReduceOp::mean) r /= C(lines.n);
  } else {
    r = line_max(team, xl);
    if (op == ReduceOp::logsumexp) {
      const C s = line_sum_exp(team, xl, r);
      // Infinite maxima (all -inf, or a +inf) are the logsumexp itself.
      if (!isinf(r)) r += ::log(s);
    }
  }
  if (team.leader()) out[team.line] = from_acc<T>(r);
}

template <class Team, class T>
__global__ void __launch_bounds__(kMaxSplitThreads)
    argmax_kernel(const T* x, int64_t* out, Lines lines) {
  using C = acc_t<T>;
  const Team team(lines);
  const Line<const T> xl{x + team.start, lines.inner};
  C best = -INFINITY;
  int64_t index = 0;
  for (int64_t k = team.first(); k < team.end; k += team.step()) {
    const C v = to_acc(xl[k]);
    if (v > best) {
      best = v;
      index = k;
    }
  }
  team.argmax(best, index);
  if (team.leader()) out[team.line] = index;
}

template <class Team, class T>
__global__ void __launch_bounds__(kMaxSplitThreads)
    softmax_kernel(const T* x, T* y, Lines lines, bool log_softmax) {
  using C = acc_t<T>;
  const Team team(lines);
  const Line<const T> xl{x + team.start, lines.inner};
  const Line<T> yl{y + team.start, lines.inner};
  const C m = line_max(team, xl);
  const C s = line_sum_exp(team, xl, m);
  if (m == C(-INFINITY)) {  // nothing to normalise: every probability is 0
    for (int64_t k = team.first(); k < team.end; k += team.step())
      yl[k] = from_acc<T>(log_softmax ? C(-INFINITY) : C(0));
    return;
  }
  const C shift = m + ::log(s), inv = C(1) / s;
  for (int64_t k = team.first(); k < team.end; k += team.step()) {
    const C v = to_acc(xl[k]);
    yl[k] = from_acc<T>(log_softmax ? v - shift : ::exp(v - m) * inv);
  }
}

// softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy).
template <class Team, class T>
__global__ void __launch_bounds__(kMaxSplitThreads)
    softmax_backward_kernel(const T* y, const T* dy, T* dx, Lines lines, bool log_softmax) {
  using C = acc_t<T>;
  const Team team(lines);
  const Line<const T> yl{y + team.start, lines.inner}, dyl{dy + team.start, lines.inner};
  const Line<T> dxl{dx + team.start, lines.inner};
  C s = 0;
  for (int64_t k = team.first(); k < team.end; k += team.step()) {
    const C g = to_acc(dyl[k]);
    s += log_softmax ? g : g * to_acc(yl[k]);
  }
  s = team.sum(s);
  for (int64_t k = team.first(); k < team.end; k += team.step()) {
    const C v = to_acc(yl[k]), g = to_acc(dyl[k]);
    dxl[k] = from_acc<T>(log_softmax ? g - ::exp(v) * s : v * (g - s));
  }
}

template <class T> T* ptr(const Tensor& t) { return static_cast<T*>(t.data_ptr()); }

// Calls run(std::type_identity<Team>{}, grid, block, smem) with the team and launch shape for
// `lines`: a block per line (threads rounded up to whole warps) for the last dim, else `split`
// threads per line (threads_per_line(lines) but for tests: a power of two with X * split <= 1024).
template <class C, class F> void launch_lines(const Lines& lines, int split, F&& run) {
  if (lines.count == 0) return;
  if (lines.inner == 1) {
    const int64_t warps = std::min<int64_t>((lines.n + 31) / 32, kMaxLineThreads / 32);
    run(std::type_identity<BlockTeam>{}, dim3(static_cast<unsigned>(lines.count)),
        dim3(static_cast<unsigned>(std::max<int64_t>(warps, 1) * 32)), size_t{0});
    return;
  }
  const int lanes = std::max(split_lanes(lines.count), 32 / std::max(split, 1));
  if (split < 1 || (split & (split - 1)) != 0 || lanes * split > kMaxSplitThreads)
    throw std::invalid_argument("[reduce] " + std::to_string(split) +
                                " threads per line: a power of two, at most " +
                                std::to_string(kMaxSplitThreads / lanes) + " for " +
                                std::to_string(lines.count) + " lines");
  if (split == 1) {
    run(std::type_identity<ThreadTeam>{},
        dim3(static_cast<unsigned>((lines.count + kThreads - 1) / kThreads)), dim3(kThreads),
        size_t{0});
    return;
  }
  const dim3 block(static_cast<unsigned>(lanes), static_cast<unsigned>(split));
  run(std::type_identity<SplitTeam>{},
      dim3(static_cast<unsigned>((lines.count + lanes - 1) / lanes)), block, split_smem<C>(block));
}

// The launchers with the threads per line of a non-last dim given (the tests pick several).

void run_reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t dim, int split,
                cudaStream_t stream) {
  visit_floating(x.dtype(), "reduce", [&](auto tag) {
    using T = decltype(tag);
    const Lines lines = lines_of(x.shape(), dim);
    launch_lines<acc_t<T>>(lines, split, [&](auto team, dim3 grid, dim3 block, size_t smem) {
      launch(reduce_kernel<typename decltype(team)::type, T>, grid, block, smem, stream, op,
             ptr<T>(x), ptr<T>(out), lines);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void run_argmax(const Tensor& x, const Tensor& out, int64_t dim, int split, cudaStream_t stream) {
  visit_floating(x.dtype(), "argmax", [&](auto tag) {
    using T = decltype(tag);
    const Lines lines = lines_of(x.shape(), dim);
    launch_lines<acc_t<T>>(lines, split, [&](auto team, dim3 grid, dim3 block, size_t smem) {
      launch(argmax_kernel<typename decltype(team)::type, T>, grid, block, smem, stream, ptr<T>(x),
             ptr<int64_t>(out), lines);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void run_softmax(const Tensor& x, const Tensor& y, int64_t dim, bool log, int split,
                 cudaStream_t stream) {
  visit_floating(x.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const Lines lines = lines_of(x.shape(), dim);
    launch_lines<acc_t<T>>(lines, split, [&](auto team, dim3 grid, dim3 block, size_t smem) {
      launch(softmax_kernel<typename decltype(team)::type, T>, grid, block, smem, stream, ptr<T>(x),
             ptr<T>(y), lines, log);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void run_softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int64_t dim,
                          bool log, int split, cudaStream_t stream) {
  visit_floating(y.dtype(), log ? "log_softmax_backward" : "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const Lines lines = lines_of(y.shape(), dim);
    launch_lines<acc_t<T>>(lines, split, [&](auto team, dim3 grid, dim3 block, size_t smem) {
      launch(softmax_backward_kernel<typename decltype(team)::type, T>, grid, block, smem, stream,
             ptr<T>(y), ptr<T>(dy), ptr<T>(dx), lines, log);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

int split_of(const Tensor& x, int64_t dim) { return threads_per_line(lines_of(x.shape(), dim)); }

}  // namespace

void reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t dim, cudaStream_t stream) {
  run_reduce(op, x, out, dim, split_of(x, dim), stream);
}

void argmax(const Tensor& x, const Tensor& out, int64_t dim, cudaStream_t stream) {
  run_argmax(x, out, dim, split_of(x, dim), stream);
}

void softmax(const Tensor& x, const Tensor& y, int64_t dim, bool log, cudaStream_t stream) {
  run_softmax(x, y, dim, log, split_of(x, dim), stream);
}

void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int64_t dim, bool log,
                      cudaStream_t stream) {
  run_softmax_backward(y, dy, dx, dim, log, split_of(y, dim), stream);
}

}  // namespace sprig::cuda
