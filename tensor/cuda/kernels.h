// CUDA twins of tensor/cpu/kernels.h: same names and arguments plus the stream to run on, and the
// device runtime (allocation, copies, streams). Each kernel is tested against its CPU twin.
// Dtypes: floating kernels handle f32, bf16 and f16 (f64 where noted by the dispatcher) with fp32
// accumulation. A CPU-only build (-DSPRIG_CUDA=OFF) compiles no kernel: the dispatcher discards
// their calls (kBuilt), and stubs.cpp gives the runtime functions, where device_count() returns 0
// and the others throw "[name] built without CUDA".
#pragma once

#include <cstddef>
#include <string>

#include "tensor/cpu/kernels.h"

using cudaStream_t = struct CUstream_st*;

namespace sprig::cuda {

// Whether this build compiled the CUDA kernels (the SPRIG_WITH_CUDA definition of the build).
inline constexpr bool kBuilt = SPRIG_WITH_CUDA;

// ---- runtime ------------------------------------------------------------------------------------
int device_count();  // 0 when built without CUDA, without a driver or without a GPU
// CUDA versions as 1000 * major + 10 * minor (13000 for 13.0): the runtime this build links and
// the newest the driver supports; 0 when built without CUDA, or for the driver without one.
int runtime_version();
int driver_version();
std::string device_name(int device);
cudaStream_t current_stream(int device);
void synchronize(int device);
// Makes `device` the calling thread's current CUDA device while the guard lives, then restores the
// previous one. Every dispatched CUDA op runs under one (SPRIG_DISPATCH), and so does allocation:
// kernels launch on their tensors' device whatever ran before, and nothing leaks a device switch.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_, previous_ = -1;
};
// Stream-ordered caching allocator (on current_stream(device)), with byte accounting.
void* device_malloc(size_t bytes, int device);
void device_free(void* ptr, int device);
size_t memory_allocated(int device);
size_t memory_peak(int device);
void reset_memory_peak(int device);
// Copies; the host side is pageable memory, and the call returns when the copy is complete.
void copy_host_to_device(void* dst, const void* src, size_t bytes, int device);
void copy_device_to_host(void* dst, const void* src, size_t bytes, int device);

// ---- kernels (see tensor/cpu/kernels.h for each contract)
// ----------------------------------------
void copy(const Tensor& src, const Tensor& dst, cudaStream_t stream);
void fill(const Tensor& dst, double value, cudaStream_t stream);

void unary(UnaryOp op, const Tensor& x, const Tensor& y, double exponent, cudaStream_t stream);
void unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy,
                    const Tensor& dx, double exponent, cudaStream_t stream);
void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, cudaStream_t stream);
void binary_scalar(BinaryOp op, const Tensor& x, double s, bool scalar_first, const Tensor& out,
                   cudaStream_t stream);
void where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out,
           cudaStream_t stream);

void reduce(ReduceOp op, const Tensor& x, const Tensor& out, int64_t dim, cudaStream_t stream);
void argmax(const Tensor& x, const Tensor& out, int64_t dim, cudaStream_t stream);
void softmax(const Tensor& x, const Tensor& y, int64_t dim, bool log, cudaStream_t stream);
void softmax_backward(const Tensor& y, const Tensor& dy, const Tensor& dx, int64_t dim, bool log,
                      cudaStream_t stream);

void embedding(const Tensor& weight, const Tensor& ids, const Tensor& out, cudaStream_t stream);
void embedding_backward(const Tensor& dy, const Tensor& ids, const Tensor& dweight,
                        cudaStream_t stream);
void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out,
                  cudaStream_t stream);
void index_add(const Tensor& dy, int64_t dim, const Tensor& idx, const Tensor& dx,
               cudaStream_t stream);
void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out,
            cudaStream_t stream);
void scatter_add(const Tensor& dy, int64_t dim, const Tensor& idx, const Tensor& dx,
                 cudaStream_t stream);
void first_out_of_range(const Tensor& idx, int64_t limit, bool has_skip, int64_t skip,
                        const Tensor& first, cudaStream_t stream);

void matmul(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b,
            bool accumulate, cudaStream_t stream);

void rms_norm(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& rstd, double eps,
              cudaStream_t stream);
void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& rstd,
                       const Tensor& dx, const Tensor& dw, cudaStream_t stream);
void rope(const Tensor& x, const Tensor& pos, const Tensor& y, const RopeFrequencies& freqs,
          bool inverse, cudaStream_t stream);
void swiglu(const Tensor& gate, const Tensor& up, const Tensor& out, cudaStream_t stream);
void swiglu_backward(const Tensor& gate, const Tensor& up, const Tensor& dout, const Tensor& dgate,
                     const Tensor& dup, cudaStream_t stream);
void gru_cell(const Tensor& gi, const Tensor& gh, const Tensor& h_prev, const Tensor& h,
              const Tensor& gates, cudaStream_t stream);
void gru_cell_backward(const Tensor& dh, const Tensor& h_prev, const Tensor& gates,
                       const Tensor& dgi, const Tensor& dgh, const Tensor& dh_prev,
                       cudaStream_t stream);

void cross_entropy(const Tensor& logits, const Tensor& targets, const Tensor& loss,
                   const Tensor& lse, const Tensor& argmax, int64_t ignore_index,
                   cudaStream_t stream);
void cross_entropy_backward(const Tensor& dloss, const Tensor& logits, const Tensor& targets,
                            const Tensor& lse, const Tensor& dlogits, int64_t ignore_index,
                            cudaStream_t stream);
void corrected_cross_entropy(const Tensor& base, const Tensor& features, const Tensor& proj,
                             const Tensor& targets, const Tensor& loss, const Tensor& lse,
                             const Tensor& argmax, int64_t ignore_index, cudaStream_t stream);
void corrected_cross_entropy_backward(const Tensor& dloss, const Tensor& base,
                                      const Tensor& features, const Tensor& proj,
                                      const Tensor& targets, const Tensor& lse, const Tensor& dbase,
                                      const Tensor& dfeatures, const Tensor& dproj,
                                      bool accumulate_dproj, int64_t ignore_index,
                                      cudaStream_t stream);
void kl_div(const Tensor& teacher, const Tensor& student, const Tensor& teacher_rows,
            const Tensor& kl, const Tensor& teacher_lse, const Tensor& student_lse,
            const Tensor& student_argmax, double temperature, cudaStream_t stream);
void kl_div_backward(const Tensor& dkl, const Tensor& teacher, const Tensor& student,
                     const Tensor& teacher_rows, const Tensor& teacher_lse,
                     const Tensor& student_lse, const Tensor& dstudent, double temperature,
                     cudaStream_t stream);

void sum_squares(const Tensor& x, const Tensor& out, cudaStream_t stream);
void adamw(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
           const Tensor& compute_copy, const AdamWParams& hp, cudaStream_t stream);

}  // namespace sprig::cuda
