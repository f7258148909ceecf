// The alignment cuBLASLt may assume for a GEMM operand (host-only, no CUDA headers: tested on the
// CPU). Every row of a row-major operand starts at base + i * pitch and every batch's matrix at
// base + b * stride, so the guarantee is the largest power of two dividing the base address, the
// row pitch and (with more than one matrix) the batch stride, all in bytes, capped at the 256
// bytes cuBLASLt assumes when told nothing.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sprig::cuda {

inline uint32_t operand_alignment(uintptr_t address, uint64_t pitch_bytes,
                                  uint64_t batch_stride_bytes) {
  uint64_t bits = address | pitch_bytes | batch_stride_bytes | 256;
  return static_cast<uint32_t>(std::min<uint64_t>(256, bits & (~bits + 1)));
}

}  // namespace sprig::cuda
