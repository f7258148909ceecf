// CPU indexing kernels: row gathers (embedding, index_select) and their scatter-add backwards
// (embedding_backward, index_add), and torch.gather / scatter_add along any dim.
//
// Layout: a tensor indexed along `dim` is viewed as [outer, rows, inner] (index_layout.h);
// embedding is the case dim = 0 of weight [V, H].
// Gathers only move elements, so they accept every dtype; scatter-adds compute in f32/f64 (the
// dispatcher converts 16-bit floats). Ids are in range (checked by the dispatcher).
// Backward rule: every scatter-add here accumulates (+=): dweight is a parameter gradient, and the
// dx of index_add / scatter_add is zero-filled by the dispatcher.
#include <algorithm>
#include <cstring>

#include "tensor/cpu/index_layout.h"
#include "tensor/cpu/kernels.h"
#include "tensor/cpu/strided.h"

namespace sprig::cpu {

namespace {

// Calls f(ptr) with ptr the typed data of an i32 or i64 index tensor.
template <class F> void visit_ids(const Tensor& ids, F&& f) {
  if (ids.dtype() == DType::i32)
    f(ids.data<int32_t>());
  else
    f(ids.data<int64_t>());
}

// Calls f(U{}) with U an unsigned integer type of the element size of `t` (gathers copy bits).
template <class F> void visit_bits(const Tensor& t, F&& f) {
  switch (dtype_size(t.dtype())) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    default: f(uint64_t{}); return;
  }
}

// out[o, j, :] = x[o, idx[j], :] for x [outer, rows, inner], out [outer, n, inner].
void select_rows(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  const RowLayout l = row_layout(x.shape(), dim);
  const int64_t n = idx.numel();
  const size_t row_bytes = static_cast<size_t>(l.inner) * dtype_size(x.dtype());
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  visit_ids(idx, [&](const auto* ids) {
#pragma omp parallel for collapse(2) if (l.outer * n * l.inner > kParallelGrain)
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t j = 0; j < n; ++j)
        std::memcpy(dst + (o * n + j) * row_bytes, src + (o * l.rows + ids[j]) * row_bytes,
                    row_bytes);
  });
}

// dx[o, idx[j], :] += dy[o, j, :] for dx [outer, rows, inner], dy [outer, n, inner]. Threads own
// disjoint (outer, column chunk) blocks of dx, so repeated ids never race.
void add_rows(const Tensor& dy, int64_t dim, const Tensor& idx, const Tensor& dx, const char* op) {
  constexpr int64_t kChunk = 256;
  const RowLayout l = row_layout(dx.shape(), dim);
  const int64_t n = idx.numel();
  const int64_t chunks = (l.inner + kChunk - 1) / kChunk;
  visit_f32_f64(dx.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* src = dy.data<T>();
    T* dst = dx.data<T>();
    visit_ids(idx, [&](const auto* ids) {
#pragma omp parallel for collapse(2) if (l.outer * n * l.inner > kParallelGrain)
      for (int64_t o = 0; o < l.outer; ++o)
        for (int64_t c = 0; c < chunks; ++c) {
          const int64_t begin = c * kChunk, end = std::min(l.inner, begin + kChunk);
          for (int64_t j = 0; j < n; ++j) {
            const T* s = src + (o * n + j) * l.inner;
            T* d = dst + (o * l.rows + ids[j]) * l.inner;
            for (int64_t i = begin; i < end; ++i) d[i] += s[i];
          }
        }
    });
  });
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& ids, const Tensor& out) {
  select_rows(weight, 0, ids, out);
}

void embedding_backward(const Tensor& dy, const Tensor& ids, const Tensor& dweight) {
  add_rows(dy, 0, ids, dweight, "embedding_backward");
}

void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  select_rows(x, dim, idx, out);
}

void index_add(const Tensor& dy, int64_t dim, const Tensor& idx, const Tensor& dx) {
  add_rows(dy, dim, idx, dx, "index_add");
}

// x may have any strides (out and idx are contiguous).
void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out) {
  const Shape& shape = idx.shape();
  const Shape base = strides_off_dim(x, dim);
  const int64_t n = idx.numel(), step = x.strides()[dim];
  visit_bits(x, [&](auto tag) {
    using U = decltype(tag);
    const U* src = static_cast<const U*>(x.data_ptr());
    U* dst = static_cast<U*>(out.data_ptr());
    visit_ids(idx, [&](const auto* ids) {
#pragma omp parallel for if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) dst[i] = src[strided_offset(i, shape, base) + ids[i] * step];
    });
  });
}

// Serial: repeated ids make any split of the loop race.
void scatter_add(const Tensor& dy, int64_t dim, const Tensor& idx, const Tensor& dx) {
  const Shape& shape = idx.shape();
  const Shape base = strides_off_dim(dx, dim);
  const int64_t n = idx.numel(), step = dx.strides()[dim];
  visit_f32_f64(dx.dtype(), "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    const T* src = dy.data<T>();
    T* dst = dx.data<T>();
    visit_ids(idx, [&](const auto* ids) {
      for (int64_t i = 0; i < n; ++i) dst[strided_offset(i, shape, base) + ids[i] * step] += src[i];
    });
  });
}

void first_out_of_range(const Tensor& idx, int64_t limit, bool has_skip, int64_t skip,
                        const Tensor& first) {
  int64_t& result = *first.data<int64_t>();
  visit_ids(idx, [&](const auto* ids) {
    for (int64_t i = 0; i < result; ++i)
      if ((ids[i] < 0 || ids[i] >= limit) && !(has_skip && ids[i] == skip)) {
        result = i;
        return;
      }
  });
}

}  // namespace sprig::cpu
