// Stand-ins for attention/cudnn/sdpa.h in builds without cuDNN: no version, and the attention
// calls (which the backend rule never routes here) throw.
#include "attention/cudnn/sdpa.h"

namespace sprig::cuda::cudnn {

namespace {
[[noreturn]] void no_cudnn() { throw std::runtime_error("[cudnn] sprig was built without cuDNN"); }
}  // namespace

int64_t describe_graph(DType, SdpaPass, const SdpaShape&) { no_cudnn(); }
int compiled_version() { return 0; }
int runtime_version() { return 0; }

void sdpa_forward(const Tensor&, const Tensor&, const Tensor&, const AttentionMask&,
                  const CudnnMaskForm&, double, const Tensor&, const Tensor&, cudaStream_t) {
  no_cudnn();
}
void sdpa_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                   const Tensor&, const AttentionMask&, const CudnnMaskForm&, double, const Tensor&,
                   const Tensor&, const Tensor&, cudaStream_t) {
  no_cudnn();
}

}  // namespace sprig::cuda::cudnn
