// The parity harness of the CUDA kernels (docs/kernels.md §8.6): one table of cases per op, run
// on every backend that can run it against the CPU twin (for attention, the dense f64 reference)
// under one tolerance rule. A case names its inputs (shapes, dtypes, seeds) and computes its
// outputs on a backend: the CPU twin (the reference), the CUDA device (tests/*/*_gpu.cpp: the op on
// device tensors) or the emulated device (tests/kernel_emu/*_emu.cpp: the real kernel source
// compiled for the host, its launcher called on host tensors). Adding a case is one row of the
// op's table (tests/parity/<op>_cases.h); adding an op is one table and its run function.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "tests/test_util.h"

namespace sprig::parity {

// Where a case runs, as bits of Case::on.
enum Backend : unsigned { kCpu = 1, kCuda = 2, kEmu = 4 };
inline constexpr unsigned kEveryDevice = kCuda | kEmu;

inline const char* backend_name(Backend b) {
  return b == kCpu ? "cpu" : b == kCuda ? "cuda" : "kernel emulation";
}

// A host tensor as a case's input on `b`: on the device for cuda, as it is otherwise.
inline Tensor on(Backend b, const Tensor& host) {
  return b == kCuda ? host.to(Device::cuda()) : host;
}

// An output the emulated kernel writes: NaN first, so an element it fails to write cannot pass.
inline Tensor nan_like(const Tensor& t) { return Tensor::full(t.shape(), NAN, t.dtype()); }

// One output of a case and how close a backend's must come to the CPU's: within
// parity_tolerance(the CPU result's dtype, terms, scale) (tests/test_util.h), exactly, or, where
// the CPU's sets a bound (attention: FlashAttention's rule), within max_error of it anywhere.
struct Output {
  std::string name;
  Tensor value;
  int64_t terms = 1;
  double scale = 1.0;
  bool exact = false;
  double max_error = -1;  // >= 0: the bound
};

// A row of an op's table: its name for failures (op, dtype, shape), the backends it runs on
// beside the CPU, and its outputs computed on a backend. The CPU computes every output; a device
// may leave out those it has no kernel for (the emulation has no backward of sum, say).
struct Case {
  std::string name;
  unsigned on = kEveryDevice;
  std::function<std::vector<Output>(Backend)> run;
};

inline ::testing::AssertionResult close(const Tensor& got, const Output& ref) {
  const Tensor host = got.to(Device::cpu());
  if (ref.exact) return testing::all_close(host, ref.value, 0.0);
  if (ref.max_error >= 0) {
    const double err = testing::max_abs_diff(host, ref.value);
    if (err <= ref.max_error) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "error " << err << " beyond " << ref.max_error;
  }
  const testing::Tolerance tol = testing::parity_tolerance(ref.value.dtype(), ref.terms, ref.scale);
  return testing::all_close(host, ref.value, tol.atol, tol.rtol);
}

// Runs every case of `cases` that runs on `target` there and on the CPU, and compares each
// output of the target with the CPU's of the same name. A cuda run needs a device (the caller
// skips without one).
inline void check(const std::vector<Case>& cases, Backend target) {
  int ran = 0;
  for (const Case& c : cases) {
    if (!(c.on & target)) continue;
    SCOPED_TRACE(c.name + " on " + backend_name(target));
    const std::vector<Output> ref = c.run(kCpu), got = c.run(target);
    EXPECT_FALSE(got.empty());
    for (const Output& out : got) {
      const auto same = [&](const Output& r) { return r.name == out.name; };
      const auto r = std::find_if(ref.begin(), ref.end(), same);
      if (r == ref.end())
        ADD_FAILURE() << "the CPU gives no output " << out.name;
      else
        EXPECT_TRUE(close(out.value, *r)) << out.name;
    }
    ++ran;
  }
  EXPECT_GT(ran, 0) << "no case of the table runs on " << backend_name(target);
}

// "<op> <dtype> <shape>": a case's name.
inline std::string case_name(const std::string& op, DType dtype, const Shape& shape) {
  return op + " " + dtype_name(dtype) + " " + shape_str(shape);
}

}  // namespace sprig::parity

// A test that runs `cases` on the CUDA device (skipped without one) or on the emulated device.
#define SPRIG_GPU_PARITY_TEST(Suite, Name, cases)          \
  TEST(Suite, Name) {                                      \
    SPRIG_REQUIRE_CUDA();                                  \
    ::sprig::parity::check(cases, ::sprig::parity::kCuda); \
  }
#define SPRIG_EMU_PARITY_TEST(Suite, Name, cases) \
  TEST(Suite, Name) { ::sprig::parity::check(cases, ::sprig::parity::kEmu); }
