// CPU-only build (-DSPRIG_CUDA=OFF): every CUDA entry point throws "[name] built without CUDA",
// except device_count(), which reports that no device is present.
#include <stdexcept>

#include "tensor/cuda/kernels.h"

namespace sprig::cuda {

namespace {
[[noreturn]] void no_cuda(const char* name) {
  throw std::runtime_error(std::string("[") + name + "] built without CUDA");
}
}  // namespace

int device_count() { return 0; }
std::string device_name(int) { no_cuda("device_name"); }
cudaStream_t current_stream(int) { no_cuda("current_stream"); }
void synchronize(int) { no_cuda("synchronize"); }
void* device_malloc(size_t, int) { no_cuda("device_malloc"); }
void device_free(void*, int) { no_cuda("device_free"); }
size_t memory_allocated(int) { no_cuda("memory_allocated"); }
size_t memory_peak(int) { no_cuda("memory_peak"); }
void reset_memory_peak(int) { no_cuda("reset_memory_peak"); }
void copy_host_to_device(void*, const void*, size_t, int) { no_cuda("copy_host_to_device"); }
void copy_device_to_host(void*, const void*, size_t, int) { no_cuda("copy_device_to_host"); }
void copy(const Tensor&, const Tensor&, cudaStream_t) { no_cuda("copy"); }
void fill(const Tensor&, double, cudaStream_t) { no_cuda("fill"); }
void unary(UnaryOp, const Tensor&, const Tensor&, double, cudaStream_t) { no_cuda("unary"); }
void unary_backward(UnaryOp, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, cudaStream_t) { no_cuda("unary_backward"); }
void binary(BinaryOp, const Tensor&, const Tensor&, const Tensor&, cudaStream_t) { no_cuda("binary"); }
void binary_scalar(BinaryOp, const Tensor&, double, bool, const Tensor&, cudaStream_t) { no_cuda("binary_scalar"); }
void where(const Tensor&, const Tensor&, const Tensor&, const Tensor&, cudaStream_t) { no_cuda("where"); }
void reduce(ReduceOp, const Tensor&, const Tensor&, int64_t, cudaStream_t) { no_cuda("reduce"); }
void argmax(const Tensor&, const Tensor&, int64_t, cudaStream_t) { no_cuda("argmax"); }
void softmax(const Tensor&, const Tensor&, int64_t, bool, cudaStream_t) { no_cuda("softmax"); }
void softmax_backward(const Tensor&, const Tensor&, const Tensor&, int64_t, bool, cudaStream_t) { no_cuda("softmax_backward"); }
void embedding(const Tensor&, const Tensor&, const Tensor&, cudaStream_t) { no_cuda("embedding"); }
void embedding_backward(const Tensor&, const Tensor&, const Tensor&, cudaStream_t) { no_cuda("embedding_backward"); }
void index_select(const Tensor&, int64_t, const Tensor&, const Tensor&, cudaStream_t) { no_cuda("index_select"); }
void index_add(const Tensor&, int64_t, const Tensor&, const Tensor&, cudaStream_t) { no_cuda("index_add"); }
void gather(const Tensor&, int64_t, const Tensor&, const Tensor&, cudaStream_t) { no_cuda("gather"); }
void scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&, cudaStream_t) { no_cuda("scatter_add"); }
void matmul(const Tensor&, const Tensor&, const Tensor&, bool, bool, bool, cudaStream_t) { no_cuda("matmul"); }
void rms_norm(const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, cudaStream_t) { no_cuda("rms_norm"); }
void rms_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, cudaStream_t) { no_cuda("rms_norm_backward"); }
void rope(const Tensor&, const Tensor&, const Tensor&, double, bool, cudaStream_t) { no_cuda("rope"); }
void swiglu(const Tensor&, const Tensor&, const Tensor&, cudaStream_t) { no_cuda("swiglu"); }
void swiglu_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, cudaStream_t) { no_cuda("swiglu_backward"); }
void cross_entropy(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, cudaStream_t) { no_cuda("cross_entropy"); }
void cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t, cudaStream_t) { no_cuda("cross_entropy_backward"); }
void kl_div(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, cudaStream_t) { no_cuda("kl_div"); }
void kl_div_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, cudaStream_t) { no_cuda("kl_div_backward"); }
void sum_squares(const Tensor&, const Tensor&, cudaStream_t) { no_cuda("sum_squares"); }
void adamw(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const AdamWParams&, cudaStream_t) { no_cuda("adamw"); }

}  // namespace sprig::cuda
