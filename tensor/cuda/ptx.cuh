// The device primitives with no portable C++ spelling: the kernel launch and the inline-PTX
// wrappers (special registers, shared-memory stores, cp.async, ldmatrix, mma.sync, the SFU
// exponential, vector reductions). Included by tensor/cuda/common.cuh. The kernel_emu tests
// compile kernels for the host against tests/kernel_emu/device_emu.h instead, which defines every
// name below (and the CUDA built-ins) with the PTX ISA's semantics (docs/kernels.md §8.6).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace sprig::cuda {

// kernel<<<grid, block, smem, stream>>>(args...): the one launch statement of every kernel.
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            Args&&... args) {
  kernel<<<grid, block, smem, stream>>>(static_cast<Params>(args)...);
}

// The CTA's dynamic shared memory (its size is the launch's `smem`), 128-byte aligned.
__device__ __forceinline__ unsigned char* dynamic_smem() {
  extern __shared__ __align__(128) unsigned char smem[];
  return smem;
}

// 2^x with the SFU (ex2.approx; 2^-inf = 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v));
}

// dst[0] += a, dst[1] += b in global memory: one vector reduction, no value returned.
__device__ __forceinline__ void red_add_f32x2(float* dst, float a, float b) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(dst), "f"(a), "f"(b) : "memory");
}

// 16 bytes global -> shared, bypassing L1; zero-fills when !valid (src is then not read).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// A fresh read of a special register. Address arithmetic derived from it is done where it is used:
// the compiler may neither hoist nor share a volatile read, so it cannot move the dozens of
// loop-invariant fragment and copy addresses of a kernel's main loop into registers (which
// spills them), and folds the compile-time parts into the instructions' immediate offsets.
__device__ __forceinline__ int fresh_lane() {
  int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}
__device__ __forceinline__ int fresh_thread() {
  int tid;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
  return tid;
}
// x, opaque to the compiler: constants added to the result stay in the instructions that use it
// instead of being shared (and kept live) across them.
__device__ __forceinline__ uint32_t pin(uint32_t x) {
  asm volatile("mov.b32 %0, %0;" : "+r"(x));
  return x;
}

// Four 32-bit registers of 16-bit pairs: an ldmatrix.x4 result, an A fragment of mma.m16n8k16, or
// the B fragments of two n8 tiles (layouts in attention/cuda/flash_common.cuh).
struct Frag {
  uint32_t r[4];
};

__device__ __forceinline__ Frag ldsm_x4(uint32_t addr) {
  Frag f;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
               : "r"(addr));
  return f;
}
__device__ __forceinline__ Frag ldsm_x4_trans(uint32_t addr) {
  Frag f;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(f.r[0]), "=r"(f.r[1]), "=r"(f.r[2]), "=r"(f.r[3])
               : "r"(addr));
  return f;
}

// c += a * b for one 16x8x16 step, fp32 accumulation; T is __nv_bfloat16 or __half.
template <class T>
__device__ __forceinline__ void mma(float (&c)[4], const Frag& a, uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b0), "r"(b1));
  }
}

}  // namespace sprig::cuda
