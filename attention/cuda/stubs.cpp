// CPU-only build (-DSPRIG_CUDA=OFF): the CUDA flash-attention entry points throw
// "[name] built without CUDA" (the host planning in flash_host.cpp is built either way).
#include <stdexcept>
#include <string>

#include "attention/cuda/flash.h"

namespace sprig::cuda {

namespace {
[[noreturn]] void no_cuda(const char* name) {
  throw std::runtime_error(std::string("[") + name + "] built without CUDA");
}
}  // namespace

void flash_attention_forward(const Tensor&, const Tensor&, const Tensor&, const DeviceTileMap&,
                             double, const Tensor&, const Tensor&, cudaStream_t) {
  no_cuda("flash_attention_forward");
}

void flash_attention_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&, const Tensor&, const DeviceTileMap&, double,
                              const Tensor&, const Tensor&, const Tensor&, cudaStream_t, bool) {
  no_cuda("flash_attention_backward");
}

}  // namespace sprig::cuda
