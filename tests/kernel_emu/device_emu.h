// The CUDA device emulated on the host, for the kernel_emu tests (docs/kernels.md §8.6). With
// SPRIG_KERNEL_EMU defined, tensor/cuda/common.cuh includes this header in place of
// tensor/cuda/ptx.cuh, and a kernel's real .cu source compiles with the host compiler: this header
// defines every name of ptx.cuh and the CUDA built-ins the kernels use.
//
// A launch runs the grid's CTAs one after another. The threads of a CTA run cooperatively, one
// fiber each, and a thread gives the CPU away only where the hardware would make it wait for
// others: __syncthreads, and the warp collectives (shuffles, ldmatrix, mma.sync), which complete
// when every lane of the warp has arrived. Warps run one at a time (in order in even CTAs,
// reversed in odd ones), each until all its lanes wait at a barrier, so a warp gets as far ahead of
// the others as a GPU could let it: a missing barrier shows as data read before it was written,
// or overwritten before the other warps read it. The collectives compute every lane's result at
// once, as the one instruction they are, with the PTX ISA's fragment layouts. cp.async copies land
// when a wait_group retires them (the latest moment the ISA allows) and zero-fill the bytes beyond
// the source size. Dynamic shared memory starts filled with 0xff bytes (NaN in every float format),
// so a read of a byte nobody wrote shows. Shared addresses are checked against its size.
//
// Errors (an address out of range, lanes at different collectives, a deadlock, a partial warp
// mask) stop the launch with std::runtime_error "[kernel_emu] ...".
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>  // types only (dim3, uint3, cudaStream_t, cudaError_t): nothing is called

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#undef __shared__
#define __shared__ static  // one CTA runs at a time: a function-local static is its shared memory
#define __launch_bounds__(...)

namespace sprig::emu {

// The CTA being run and the calling thread's index in it.
struct CtaInfo {
  uint3 block_idx;
  dim3 block_dim, grid_dim;
};
const CtaInfo& cta();
const uint3& thread_idx();
int linear_thread();  // threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)
inline int lane() { return linear_thread() % 32; }

[[noreturn]] void fail(const std::string& what);

// Runs body() as every thread of every CTA of the grid, with `smem` bytes of dynamic shared memory.
void run_grid(dim3 grid, dim3 block, size_t smem, const std::function<void()>& body);

void sync_threads();

// ---- warp collectives -------------------------------------------------------------------------

constexpr int kSlotBytes = 64;  // the largest per-lane input or output of a collective

// One lane's place in a collective: the 32 inputs and outputs, and whether this lane arrived last.
struct Arrival {
  const unsigned char* in;
  unsigned char* out;
  bool last;
  int lane;
  uint64_t generation;
};
Arrival arrive(const char* what, unsigned mask, const void* input, size_t bytes);
// The last lane publishes the outputs it computed; the others wait for them.
void depart(const Arrival& a);

// The inputs of lanes 0-31 (In) or their outputs (Out), as arrays.
template <class T> struct Lanes {
  const unsigned char* base;
  const T& operator[](int lane) const {
    return *reinterpret_cast<const T*>(base + lane * kSlotBytes);
  }
};
template <class T> struct LaneOutputs {
  unsigned char* base;
  T& operator[](int lane) const { return *reinterpret_cast<T*>(base + lane * kSlotBytes); }
};

// One warp-wide instruction: every lane of `mask` (the full warp) contributes `input`; when the
// last one arrives, compute(Lanes<In>, LaneOutputs<Out>) computes every lane's output at once, and
// each lane gets its own.
template <class Out, class In, class F>
Out warp_collective(const char* what, unsigned mask, const In& input, F&& compute) {
  static_assert(sizeof(In) <= kSlotBytes && sizeof(Out) <= kSlotBytes);
  static_assert(std::is_trivially_copyable_v<In> && std::is_trivially_copyable_v<Out>);
  const Arrival a = arrive(what, mask, &input, sizeof(In));
  if (a.last) compute(Lanes<In>{a.in}, LaneOutputs<Out>{a.out});
  depart(a);
  Out out;
  std::memcpy(&out, a.out + a.lane * kSlotBytes, sizeof(Out));
  return out;
}

// ---- shared memory and cp.async ---------------------------------------------------------------

// The bytes [addr, addr + bytes) of the dynamic shared memory; addr must be a multiple of `align`.
unsigned char* shared_bytes(uint32_t addr, size_t bytes, size_t align, const char* what);
unsigned char* dynamic_smem();
uint32_t shared_address(const void* generic);

void cp_async(uint32_t dst, const void* src, int src_bytes);
void cp_async_commit();
void cp_async_wait(int pending);

}  // namespace sprig::emu

// ---- the CUDA built-ins -----------------------------------------------------------------------

#define threadIdx (::sprig::emu::thread_idx())
#define blockIdx (::sprig::emu::cta().block_idx)
#define blockDim (::sprig::emu::cta().block_dim)
#define gridDim (::sprig::emu::cta().grid_dim)

// Runtime calls of the launchers: nothing runs asynchronously, nothing fails silently.
#define cudaGetLastError() cudaSuccess
#define cudaFuncSetAttribute(...) cudaSuccess
#define cudaGetDevice(device) (*(device) = 0, cudaSuccess)
#define cudaMemsetAsync(ptr, value, bytes, stream) \
  (std::memset((ptr), (value), (bytes)), cudaSuccess)
#define cudaMemcpyAsync(dst, src, bytes, kind, stream) \
  (std::memcpy((dst), (src), (bytes)), cudaSuccess)

inline void __syncthreads() { sprig::emu::sync_threads(); }

template <class T> T __shfl_xor_sync(unsigned mask, T value, int lane_mask) {
  return sprig::emu::warp_collective<T>("shfl.sync.bfly", mask, value, [&](auto in, auto out) {
    for (int l = 0; l < 32; ++l) out[l] = in[(l ^ lane_mask) & 31];
  });
}

template <class T> T __ldg(const T* p) { return *p; }

// Fibers switch only at barriers and collectives, so a read-modify-write is atomic.
template <class T> T atomicAdd(T* p, T v) {
  const T old = *p;
  *p = old + v;
  return old;
}
template <class T> T atomicMin(T* p, T v) {
  const T old = *p;
  *p = v < old ? v : old;
  return old;
}

inline size_t __cvta_generic_to_shared(const void* p) { return sprig::emu::shared_address(p); }

// The device overloads of ::max (fmaxf for floats, as CUDA's).
inline float max(float a, float b) { return fmaxf(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline int max(int a, int b) { return a < b ? b : a; }
inline long max(long a, long b) { return a < b ? b : a; }
inline long long max(long long a, long long b) { return a < b ? b : a; }

// The device's float overloads of the math functions (expf, logf, sqrtf) and its isinf: on the
// host, ::exp(float) would be exp(double), and isinf exists only as std::isinf.
inline float exp(float x) { return expf(x); }
inline float log(float x) { return logf(x); }
inline float sqrt(float x) { return sqrtf(x); }
inline bool isinf(float x) { return std::isinf(x); }
inline bool isinf(double x) { return std::isinf(x); }

// ---- tensor/cuda/ptx.cuh ----------------------------------------------------------------------

namespace sprig::cuda {

template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t,
            Args&&... args) {
  const std::tuple<std::decay_t<Params>...> params(static_cast<Params>(args)...);
  emu::run_grid(grid, block, smem, [&] { std::apply(kernel, params); });
}

inline unsigned char* dynamic_smem() { return emu::dynamic_smem(); }

// ex2.approx.ftz.f32: subnormal inputs and results flush to zero.
inline float fast_exp2(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.f;
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.f : y;
}

inline void st_shared_b32(uint32_t addr, uint32_t v) {
  std::memcpy(emu::shared_bytes(addr, 4, 4, "st.shared.b32"), &v, 4);
}

inline void red_add_f32x2(float* dst, float a, float b) {
  if (reinterpret_cast<uintptr_t>(dst) % 8 != 0) emu::fail("red.global.add.v2.f32: misaligned");
  dst[0] += a;
  dst[1] += b;
}

inline void cp_async_16(uint32_t dst, const void* src, bool valid) {
  emu::cp_async(dst, src, valid ? 16 : 0);
}
inline void cp_async_commit() { emu::cp_async_commit(); }
template <int N> void cp_async_wait() { emu::cp_async_wait(N); }

inline int fresh_lane() { return emu::lane(); }
inline int fresh_thread() { return static_cast<int>(emu::thread_idx().x); }
inline uint32_t pin(uint32_t x) { return x; }

struct Frag {
  uint32_t r[4];
};

namespace emu_detail {

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lanes 8i..8i+7 address the eight 16-byte rows
// of matrix i; register i of lane l holds row l/4, elements 2(l%4), 2(l%4)+1 of matrix i, or with
// .trans the elements (2(l%4), l/4) and (2(l%4)+1, l/4).
inline Frag ldmatrix_x4(uint32_t addr, bool trans) {
  return sprig::emu::warp_collective<Frag>(
      trans ? "ldmatrix.x4.trans" : "ldmatrix.x4", 0xffffffffu, addr, [&](auto in, auto out) {
        uint16_t m[4][8][8];
        for (int i = 0; i < 4; ++i)
          for (int r = 0; r < 8; ++r)
            std::memcpy(m[i][r], emu::shared_bytes(in[8 * i + r], 16, 16, "ldmatrix"), 16);
        for (int l = 0; l < 32; ++l) {
          const int g = l / 4, t = l % 4;
          for (int i = 0; i < 4; ++i) {
            const uint16_t lo = trans ? m[i][2 * t][g] : m[i][g][2 * t];
            const uint16_t hi = trans ? m[i][2 * t + 1][g] : m[i][g][2 * t + 1];
            out[l].r[i] = uint32_t(lo) | uint32_t(hi) << 16;
          }
        }
      });
}

template <class T> float half_bits_to_float(uint16_t bits) {
  T v;
  std::memcpy(static_cast<void*>(&v), &bits, 2);
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return __half2float(v);
}

}  // namespace emu_detail

inline Frag ldsm_x4(uint32_t addr) { return emu_detail::ldmatrix_x4(addr, false); }
inline Frag ldsm_x4_trans(uint32_t addr) { return emu_detail::ldmatrix_x4(addr, true); }

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: with g = lane / 4, t = lane % 4, A's
// registers hold (g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..); B's (k 2t..2t+1, n g) and
// (k 2t+8.., n g); C's (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1). Products are exact in fp32 and
// summed in double, then rounded once with C.
template <class T> void mma(float (&c)[4], const Frag& a, uint32_t b0, uint32_t b1) {
  struct In {
    Frag a;
    uint32_t b[2];
    float c[4];
  };
  struct Out {
    float d[4];
  };
  const In in{a, {b0, b1}, {c[0], c[1], c[2], c[3]}};
  const Out out =
      sprig::emu::warp_collective<Out>("mma.m16n8k16", 0xffffffffu, in, [](auto lanes, auto outs) {
        float A[16][16], B[16][8], C[16][8];
        const auto half = [](uint32_t reg, int j) {
          return emu_detail::half_bits_to_float<T>(static_cast<uint16_t>(reg >> (16 * j)));
        };
        for (int l = 0; l < 32; ++l) {
          const int g = l / 4, t = l % 4;
          const In& x = lanes[l];
          for (int j = 0; j < 2; ++j) {
            A[g][2 * t + j] = half(x.a.r[0], j);
            A[g + 8][2 * t + j] = half(x.a.r[1], j);
            A[g][2 * t + 8 + j] = half(x.a.r[2], j);
            A[g + 8][2 * t + 8 + j] = half(x.a.r[3], j);
            B[2 * t + j][g] = half(x.b[0], j);
            B[2 * t + 8 + j][g] = half(x.b[1], j);
            C[g][2 * t + j] = x.c[j];
            C[g + 8][2 * t + j] = x.c[2 + j];
          }
        }
        for (int l = 0; l < 32; ++l) {
          const int g = l / 4, t = l % 4;
          for (int i = 0; i < 4; ++i) {
            const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
            double sum = 0;
            for (int k = 0; k < 16; ++k) sum += double(A[row][k]) * B[k][col];
            outs[l].d[i] = static_cast<float>(sum + C[row][col]);
          }
        }
      });
  for (int i = 0; i < 4; ++i) c[i] = out.d[i];
}

}  // namespace sprig::cuda
