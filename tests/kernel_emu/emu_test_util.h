// Helpers of the kernel_emu tests outside the parity tables (tests/parity): outputs that start as
// NaN, so that an element a kernel fails to write cannot pass, and the GPU tests' parity rule
// (tests/test_util.h) for emulated results.
#pragma once

#include <gtest/gtest.h>

#include <cmath>

#include "tensor/tensor.h"
#include "tests/parity/parity.h"
#include "tests/test_util.h"

namespace sprig::emu {

using parity::nan_like;

// The emulated kernel's result (a host tensor) against the CPU twin under parity_tolerance.
inline ::testing::AssertionResult parity(const Tensor& emulated, const Tensor& cpu,
                                         int64_t terms = 1, double scale = 1.0) {
  const testing::Tolerance tol = testing::parity_tolerance(cpu.dtype(), terms, scale);
  return testing::all_close(emulated, cpu, tol.atol, tol.rtol);
}

}  // namespace sprig::emu

// EXPECT_EMU_PARITY(emulated, cpu[, terms[, scale]]): EXPECT_PARITY for an emulated result.
#define EXPECT_EMU_PARITY(emulated, cpu, ...) \
  EXPECT_TRUE(::sprig::emu::parity((emulated), (cpu)__VA_OPT__(, ) __VA_ARGS__))
