// Index arithmetic shared by the CPU indexing kernels (tensor/cpu/index.cpp) and their CUDA twins
// (tensor/cuda/index.cu), so both address elements the same way.
#pragma once

#include <cstdint>

#include "tensor/tensor.h"

namespace sprig {

// A shape viewed as [outer, rows, inner] around `dim`: outer is the product of the dims before
// dim, inner the product of those after (row gathers and row scatter-adds work on this view).
struct RowLayout {
  int64_t outer = 1, rows = 1, inner = 1;
};

inline RowLayout row_layout(const Shape& shape, int64_t dim) {
  RowLayout l;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim)
      l.outer *= shape[d];
    else if (d == dim)
      l.rows = shape[d];
    else
      l.inner *= shape[d];
  }
  return l;
}

// For gather / scatter_add: strides that map a position of idx's shape to its element of `t`,
// except along `dim` (stride 0 here), whose coordinate is the id times t's stride of dim.
inline Shape strides_off_dim(const Tensor& t, int64_t dim) {
  Shape s = t.strides();
  s[dim] = 0;
  return s;
}

}  // namespace sprig
