// CPU-only build (-DSPRIG_CUDA=OFF): the CUDA halves of reference.h throw.
#include <stdexcept>

#include "tools/bench/reference.h"

namespace sprig::bench {

namespace {
[[noreturn]] void no_cuda() { throw std::runtime_error("[bench] built without CUDA"); }
}  // namespace

double cuda_median_seconds(int, int, int, const std::function<void()>&) { no_cuda(); }
std::function<void()> cuda_reference_copy(const Tensor&, const Tensor&) { no_cuda(); }
std::function<void()> cuda_reference_gemm(const Tensor&, const Tensor&, const Tensor&, bool, bool) {
  no_cuda();
}

}  // namespace sprig::bench
