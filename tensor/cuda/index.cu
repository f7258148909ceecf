// CUDA indexing kernels, twins of tensor/cpu/index.cpp (same contracts): row gathers (embedding,
// index_select) and their scatter-adds (embedding_backward, index_add) on the [outer, rows, inner]
// view around dim (index_layout.h), and torch.gather / scatter_add along any dim.
//
// Gathers copy raw element bits (16-byte units when the row size and addresses allow), so they
// serve every dtype. Scatter-adds use atomicAdd: straight into f32/f64 gradients; a 16-bit gradient
// is accumulated in an fp32 scratch buffer and then added with a single rounding, as on the CPU
// (bf16 atomics would round after every add and drop small updates to frequent ids). The atomic
// summation order varies, so the last bits of sums over repeated ids may vary between runs.
// Ids are in range (checked by the dispatcher).
// Backward rule: every scatter-add here accumulates (+=) into dweight / dx.
#include "tensor/cpu/index_layout.h"
#include "tensor/cuda/strided.cuh"

namespace sprig::cuda {

namespace {

constexpr int kThreads = 256;

#define GRID_STRIDE_LOOP(i, n)                                              \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += int64_t(gridDim.x) * blockDim.x)

// The value a scatter-add accumulates: fp32 for f32/bf16/f16, fp64 for f64.
template <class T> __device__ __forceinline__ typename AccType<T>::type to_acc(T v) {
  if constexpr (std::is_same_v<T, double>)
    return v;
  else
    return to_float(v);
}

// out[o, j, :] = x[o, ids[j], :] in units U; inner counts units per row.
template <class U, class I>
__global__ void select_rows_kernel(const U* x, const I* ids, U* out, int64_t outer, int64_t rows,
                                   int64_t n, int64_t inner) {
  GRID_STRIDE_LOOP(t, outer * n * inner) {
    const int64_t i = t % inner, r = t / inner;  // r = o * n + j
    const int64_t j = r % n, o = r / n;
    out[t] = x[(o * rows + ids[j]) * inner + i];
  }
}

// dx[o, ids[j], :] += dy[o, j, :] (dx in the accumulation type A).
template <class T, class A, class I>
__global__ void add_rows_kernel(const T* dy, const I* ids, A* dx, int64_t outer, int64_t rows,
                                int64_t n, int64_t inner) {
  GRID_STRIDE_LOOP(t, outer * n * inner) {
    const int64_t i = t % inner, r = t / inner;
    const int64_t j = r % n, o = r / n;
    atomicAdd(dx + (o * rows + ids[j]) * inner + i, to_acc(dy[t]));
  }
}

// out[i] = x[base.offset(i) + ids[i] * step] over idx's shape (x any strides).
template <class U, class I>
__global__ void gather_kernel(const U* x, StridedIndex base, int64_t step, const I* ids, U* out,
                              int64_t n) {
  GRID_STRIDE_LOOP(i, n) out[i] = x[base.offset(i) + ids[i] * step];
}

// dx[base.offset(i) + ids[i] * step] += dy[i] over idx's shape (dx contiguous, type A).
template <class T, class A, class I>
__global__ void scatter_add_kernel(const T* dy, StridedIndex base, int64_t step, const I* ids,
                                   A* dx, int64_t n) {
  GRID_STRIDE_LOOP(i, n) atomicAdd(dx + base.offset(i) + ids[i] * step, to_acc(dy[i]));
}

// dx += sum (fp32 scratch into a 16-bit gradient, one rounding per element).
// Grid-stride over the index: the smallest bad position wins through atomicMin.
template <class I>
__global__ void first_out_of_range_kernel(const I* ids, int64_t n, int64_t limit, bool has_skip,
                                          int64_t skip, unsigned long long* first) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = ids[i];
    if ((v < 0 || v >= limit) && !(has_skip && v == skip))
      atomicMin(first, static_cast<unsigned long long>(i));
  }
}

template <class T> __global__ void add_scratch_kernel(const float* sum, T* dx, int64_t n) {
  GRID_STRIDE_LOOP(i, n) dx[i] = from_float<T>(to_float(dx[i]) + sum[i]);
}

#undef GRID_STRIDE_LOOP

// The element type a pointer P points to, without const.
template <class P> using pointee_t = std::remove_const_t<std::remove_pointer_t<P>>;

// Calls f(ptr) with ptr the typed device data of an i32 or i64 index tensor.
template <class F> void visit_ids(const Tensor& ids, F&& f) {
  if (ids.dtype() == DType::i32)
    f(static_cast<const int32_t*>(ids.data_ptr()));
  else
    f(static_cast<const int64_t*>(ids.data_ptr()));
}

// Calls f(U{}) with U a trivially copyable type of `bytes` bytes (1, 2, 4, 8 or 16).
template <class F> void visit_unit(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    case 8: f(uint2{}); return;
    default: f(uint4{}); return;
  }
}

// Widest unit (16 bytes at most) dividing the row size and both base addresses.
size_t copy_unit(size_t row_bytes, const void* src, const void* dst) {
  const auto addresses = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst);
  size_t unit = 16;
  while (unit > 1 && (row_bytes % unit != 0 || addresses % unit != 0)) unit /= 2;
  return unit;
}

void select_rows(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out,
                 cudaStream_t stream) {
  if (out.numel() == 0) return;
  const RowLayout l = row_layout(x.shape(), dim);
  const size_t row_bytes = static_cast<size_t>(l.inner) * dtype_size(x.dtype());
  const size_t unit = copy_unit(row_bytes, x.data_ptr(), out.data_ptr());
  const int64_t n = idx.numel(), inner = static_cast<int64_t>(row_bytes / unit);
  visit_unit(unit, [&](auto tag) {
    using U = decltype(tag);
    visit_ids(idx, [&](const auto* ids) {
      launch(select_rows_kernel<U, pointee_t<decltype(ids)>>,
             grid_for(l.outer * n * inner, kThreads), kThreads, 0, stream,
             static_cast<const U*>(x.data_ptr()), ids, static_cast<U*>(out.data_ptr()), l.outer,
             l.rows, n, inner);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

// Runs add(T{}, acc) for dx of device type T, with acc the buffer atomics target: dx itself for
// f32/f64, else a zeroed fp32 scratch that is then added into dx.
template <class F>
void scatter_into(const Tensor& dx, const char* op, cudaStream_t stream, F&& add) {
  visit_floating(dx.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    using A = typename AccType<T>::type;
    if constexpr (std::is_same_v<T, A>) {
      add(tag, static_cast<A*>(dx.data_ptr()));
    } else {
      const int64_t n = dx.numel();
      const Tensor scratch = scratch_tensor(op, dx.shape(), DType::f32, dx.device(), stream);
      CUDA_CHECK(cudaMemsetAsync(scratch.data_ptr(), 0, scratch.nbytes(), stream));
      add(tag, static_cast<float*>(scratch.data_ptr()));
      launch(add_scratch_kernel<T>, grid_for(n, kThreads), kThreads, 0, stream,
             static_cast<const float*>(scratch.data_ptr()), static_cast<T*>(dx.data_ptr()), n);
    }
  });
  CUDA_CHECK(cudaGetLastError());
}

void add_rows(const Tensor& dy, int64_t dim, const Tensor& idx, const Tensor& dx, const char* op,
              cudaStream_t stream) {
  if (dy.numel() == 0) return;
  const RowLayout l = row_layout(dx.shape(), dim);
  const int64_t n = idx.numel();
  scatter_into(dx, op, stream, [&](auto tag, auto* acc) {
    using T = decltype(tag);
    visit_ids(idx, [&](const auto* ids) {
      launch(add_rows_kernel<T, pointee_t<decltype(acc)>, pointee_t<decltype(ids)>>,
             grid_for(l.outer * n * l.inner, kThreads), kThreads, 0, stream,
             static_cast<const T*>(dy.data_ptr()), ids, acc, l.outer, l.rows, n, l.inner);
    });
  });
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& ids, const Tensor& out, cudaStream_t stream) {
  select_rows(weight, 0, ids, out, stream);
}

void embedding_backward(const Tensor& dy, const Tensor& ids, const Tensor& dweight,
                        cudaStream_t stream) {
  add_rows(dy, 0, ids, dweight, "embedding_backward", stream);
}

void index_select(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out,
                  cudaStream_t stream) {
  select_rows(x, dim, idx, out, stream);
}

void index_add(const Tensor& dy, int64_t dim, const Tensor& idx, const Tensor& dx,
               cudaStream_t stream) {
  add_rows(dy, dim, idx, dx, "index_add", stream);
}

void gather(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& out,
            cudaStream_t stream) {
  const int64_t n = idx.numel();
  if (n == 0) return;
  const StridedIndex base(idx.shape(), strides_off_dim(x, dim));
  visit_unit(dtype_size(x.dtype()), [&](auto tag) {
    using U = decltype(tag);
    visit_ids(idx, [&](const auto* ids) {
      launch(gather_kernel<U, pointee_t<decltype(ids)>>, grid_for(n, kThreads), kThreads, 0, stream,
             static_cast<const U*>(x.data_ptr()), base, x.strides()[dim], ids,
             static_cast<U*>(out.data_ptr()), n);
    });
  });
  CUDA_CHECK(cudaGetLastError());
}

void scatter_add(const Tensor& dy, int64_t dim, const Tensor& idx, const Tensor& dx,
                 cudaStream_t stream) {
  const int64_t n = idx.numel();
  if (n == 0) return;
  const StridedIndex base(idx.shape(), strides_off_dim(dx, dim));
  scatter_into(dx, "scatter_add", stream, [&](auto tag, auto* acc) {
    using T = decltype(tag);
    visit_ids(idx, [&](const auto* ids) {
      launch(scatter_add_kernel<T, pointee_t<decltype(acc)>, pointee_t<decltype(ids)>>,
             grid_for(n, kThreads), kThreads, 0, stream, static_cast<const T*>(dy.data_ptr()), base,
             dx.strides()[dim], ids, acc, n);
    });
  });
}

void first_out_of_range(const Tensor& idx, int64_t limit, bool has_skip, int64_t skip,
                        const Tensor& first, cudaStream_t stream) {
  const int64_t n = idx.numel();
  if (n == 0) return;
  visit_ids(idx, [&](const auto* ids) {
    launch(first_out_of_range_kernel<pointee_t<decltype(ids)>>, grid_for(n, kThreads), kThreads, 0,
           stream, ids, n, limit, has_skip, skip,
           static_cast<unsigned long long*>(first.data_ptr()));
  });
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace sprig::cuda
