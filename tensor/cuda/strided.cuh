// Strided addressing for CUDA kernels: shape and strides (in elements) of up to kMaxDims dims
// passed by value, mapping a row-major linear index to an element offset.
#pragma once

#include "tensor/cuda/common.cuh"

namespace sprig::cuda {

constexpr int kMaxDims = 8;

struct StridedIndex {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};

  StridedIndex() = default;
  StridedIndex(const Shape& shape_, const Shape& strides_) {
    if (shape_.size() > kMaxDims)
      throw std::invalid_argument("[cuda] tensors with more than 8 dimensions are not supported");
    ndim = static_cast<int>(shape_.size());
    for (int d = 0; d < ndim; ++d) {
      shape[d] = shape_[d];
      strides[d] = strides_[d];
    }
  }
  explicit StridedIndex(const Tensor& t) : StridedIndex(t.shape(), t.strides()) {}

  __device__ __forceinline__ int64_t offset(int64_t i) const {
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      off += (i % shape[d]) * strides[d];
      i /= shape[d];
    }
    return off;
  }
};

}  // namespace sprig::cuda
