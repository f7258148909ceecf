// What the benchmarks measure sprig against, called directly rather than through sprig's kernels:
// a memory copy (the bandwidth ceiling of memory-bound kernels) and the vendor GEMM (the ceiling
// of matmul), plus the timer that measures both sides the same way.
// CPU: std::memcpy split over the OpenMP threads, Eigen, wall-clock time (reference.cpp).
// CUDA: cudaMemcpyAsync, cuBLASLt, CUDA events on the device's current stream (reference_cuda.cu,
// compiled only with CUDA; no CUDA tensor exists in a build without it).
#pragma once

#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace sprig::bench {

// Median of timing samples (shared by the CPU and CUDA timers).
double median(std::vector<double> samples);

// Median seconds per call of fn() over `reps` calls, after `warmup` untimed calls. On CUDA the
// calls are queued back to back between events, so the time includes any host overhead that
// leaves the device idle.
double median_seconds(Device device, int warmup, int reps, const std::function<void()>& fn);

// A call copying src's bytes into dst (both contiguous, same byte size, same device).
std::function<void()> reference_copy(const Tensor& src, const Tensor& dst);

// A call computing out = op(a) @ op(b) for 2-D contiguous row-major a, b, out (op transposes when
// the flag is set) with the library sprig builds on: Eigen on CPU (f32), cuBLASLt on CUDA (one
// floating dtype for all three, fp32 accumulation). Planning happens here, not in the call.
std::function<void()> reference_gemm(const Tensor& a, const Tensor& b, const Tensor& out,
                                     bool trans_a, bool trans_b);

// The CUDA halves of the functions above.
double cuda_median_seconds(int device, int warmup, int reps, const std::function<void()>& fn);
std::function<void()> cuda_reference_copy(const Tensor& src, const Tensor& dst);
std::function<void()> cuda_reference_gemm(const Tensor& a, const Tensor& b, const Tensor& out,
                                          bool trans_a, bool trans_b);

}  // namespace sprig::bench
