// Indexing ops: embedding, concat / split, index_select, gather, and their backwards. Ids are
// range-checked on the host (CUDA ids are copied there first) so a bad id is a clear error
// naming its value and position, never an out-of-bounds access in a kernel.
#include <numeric>

#include "tensor/ops.h"
#include "tensor/ops/dispatch.h"

namespace sprig {

using detail::fail;

namespace {

// Throws unless every id lies in [0, n), naming the first offender and its row-major position.
void check_ids(const char* op, const char* what, const Tensor& ids, int64_t n) {
  const std::vector<int64_t> values = ids.to_vector<int64_t>();
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] < 0 || values[i] >= n)
      fail(op, std::string(what) + " " + std::to_string(values[i]) + " out of range [0, " +
                   std::to_string(n) + ") at position " + std::to_string(i));
}

// Runs add(acc) on a contiguous compute-dtype tensor holding target's values, then writes acc
// back into target when it was a copy (16-bit floats on CPU, or a strided target).
template <class F> void accumulate_into(const Tensor& target, F&& add) {
  const Tensor acc = detail::for_compute(target);
  add(acc);
  if (!acc.shares_storage(target)) target.copy_(acc);
}

// Checks shared by every op below: data and its ids defined, ids of an index dtype, one device.
void check_ids_arg(const char* op, const Tensor& data, const char* data_name, const Tensor& ids,
                   const char* ids_name) {
  detail::check_defined(op, data, data_name);
  detail::check_defined(op, ids, ids_name);
  detail::check_index(op, ids, ids_name);
  detail::check_same_device(op, {&data, &ids});
}

// Checks shared by index_select and its backward (data is x or dy); returns dim normalised.
int64_t check_select(const char* op, const Tensor& data, const char* data_name,
                     const Shape& x_shape, int64_t dim, const Tensor& idx) {
  check_ids_arg(op, data, data_name, idx, "idx");
  detail::check_dim(op, idx, 1, "idx");
  dim = normalize_dim(dim, static_cast<int64_t>(x_shape.size()), op);
  check_ids(op, "index", idx, x_shape[dim]);
  return dim;
}

// Checks shared by gather and its backward (torch.gather rules); returns dim normalised.
int64_t check_gather(const char* op, const Tensor& data, const char* data_name,
                     const Shape& x_shape, int64_t dim, const Tensor& idx) {
  check_ids_arg(op, data, data_name, idx, "idx");
  const int64_t ndim = static_cast<int64_t>(x_shape.size());
  if (idx.dim() != ndim)
    fail(op, "idx " + shape_str(idx.shape()) + " must have as many dimensions as x " +
                 shape_str(x_shape));
  dim = normalize_dim(dim, ndim, op);
  for (int64_t d = 0; d < ndim; ++d)
    if (d != dim && idx.size(d) > x_shape[d])
      fail(op, "idx " + shape_str(idx.shape()) + " is larger than x " + shape_str(x_shape) +
                   " in dim " + std::to_string(d));
  check_ids(op, "index", idx, x_shape[dim]);
  return dim;
}

// shape with dim resized to n: index_select's output shape (with n = 0, concat compares shapes
// outside dim).
Shape with_size(Shape shape, int64_t dim, int64_t n) {
  shape[dim] = n;
  return shape;
}

}  // namespace

// ---- embedding ----------------------------------------------------------------------------------

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  const char* op = "embedding";
  check_ids_arg(op, weight, "weight", ids, "ids");
  detail::check_dim(op, weight, 2, "weight");
  check_ids(op, "id", ids, weight.size(0));
  Shape shape = ids.shape();
  shape.push_back(weight.size(1));
  Tensor out = Tensor::empty(shape, weight.dtype(), weight.device());
  const int64_t n = ids.numel();
  SPRIG_DISPATCH(weight.device(), embedding, weight.contiguous(), ids.contiguous().view({n}),
                 out.view({n, weight.size(1)}));
  return out;
}

void embedding_backward(const Tensor& dy, const Tensor& ids, const Tensor& dweight) {
  const char* op = "embedding_backward";
  check_ids_arg(op, dy, "dy", ids, "ids");
  detail::check_defined(op, dweight, "dweight");
  detail::check_dim(op, dweight, 2, "dweight");
  detail::check_floating(op, dweight, "dweight");
  detail::check_same_dtype(op, dy, dweight);
  detail::check_same_device(op, {&dy, &dweight});
  Shape shape = ids.shape();
  shape.push_back(dweight.size(1));
  detail::check_shape(op, dy, shape, "dy");
  check_ids(op, "id", ids, dweight.size(0));
  const int64_t n = ids.numel();
  accumulate_into(dweight, [&](const Tensor& acc) {
    SPRIG_DISPATCH(dweight.device(), embedding_backward,
                   detail::for_compute(dy).view({n, dweight.size(1)}), ids.contiguous().view({n}),
                   acc);
  });
}

// ---- concat / split -----------------------------------------------------------------------------

Tensor concat(const std::vector<Tensor>& xs, int64_t dim) {
  const char* op = "concat";
  if (xs.empty()) fail(op, "needs at least one tensor, got an empty list");
  for (size_t i = 0; i < xs.size(); ++i)
    detail::check_defined(op, xs[i], ("tensor " + std::to_string(i)).c_str());
  const Tensor& first = xs.front();
  dim = normalize_dim(dim, first.dim(), op);
  int64_t total = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    detail::check_same_device(op, {&first, &x});
    detail::check_same_dtype(op, first, x);
    if (x.dim() != first.dim() || with_size(x.shape(), dim, 0) != with_size(first.shape(), dim, 0))
      fail(op, "tensor " + std::to_string(i) + " has shape " + shape_str(x.shape()) +
                   ", which differs from tensor 0's " + shape_str(first.shape()) + " outside dim " +
                   std::to_string(dim));
    total += x.size(dim);
  }
  Tensor out = Tensor::empty(with_size(first.shape(), dim, total), first.dtype(), first.device());
  int64_t start = 0;
  for (const Tensor& x : xs) {
    out.narrow(dim, start, x.size(dim)).copy_(x);
    start += x.size(dim);
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  const char* op = "split";
  detail::check_defined(op, x, "x");
  dim = normalize_dim(dim, x.dim(), op);
  for (int64_t s : sizes)
    if (s < 0) fail(op, "sizes " + shape_str(sizes) + " contain a negative size");
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  if (total != x.size(dim))
    fail(op, "sizes " + shape_str(sizes) + " sum to " + std::to_string(total) + ", but dim " +
                 std::to_string(dim) + " of " + shape_str(x.shape()) + " has size " +
                 std::to_string(x.size(dim)));
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (int64_t s : sizes) {
    pieces.push_back(x.narrow(dim, start, s));
    start += s;
  }
  return pieces;
}

// ---- index_select -------------------------------------------------------------------------------

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx) {
  const char* op = "index_select";
  dim = check_select(op, x, "x", x.shape(), dim, idx);
  Tensor out = Tensor::empty(with_size(x.shape(), dim, idx.numel()), x.dtype(), x.device());
  SPRIG_DISPATCH(x.device(), index_select, x.contiguous(), dim, idx.contiguous(), out);
  return out;
}

Tensor index_select_backward(const Tensor& dy, const Shape& x_shape, int64_t dim,
                             const Tensor& idx) {
  const char* op = "index_select_backward";
  dim = check_select(op, dy, "dy", x_shape, dim, idx);
  detail::check_floating(op, dy, "dy");
  detail::check_shape(op, dy, with_size(x_shape, dim, idx.numel()), "dy");
  Tensor dx = Tensor::zeros(x_shape, detail::compute_dtype(dy), dy.device());
  SPRIG_DISPATCH(dy.device(), index_add, detail::for_compute(dy), dim, idx.contiguous(), dx);
  return dx.to(dy.dtype());
}

// ---- gather -------------------------------------------------------------------------------------

Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx) {
  const char* op = "gather";
  dim = check_gather(op, x, "x", x.shape(), dim, idx);
  Tensor out = Tensor::empty(idx.shape(), x.dtype(), x.device());
  SPRIG_DISPATCH(x.device(), gather, x, dim, idx.contiguous(), out);
  return out;
}

Tensor gather_backward(const Tensor& dy, const Shape& x_shape, int64_t dim, const Tensor& idx) {
  const char* op = "gather_backward";
  dim = check_gather(op, dy, "dy", x_shape, dim, idx);
  detail::check_floating(op, dy, "dy");
  detail::check_shape(op, dy, idx.shape(), "dy");
  Tensor dx = Tensor::zeros(x_shape, detail::compute_dtype(dy), dy.device());
  SPRIG_DISPATCH(dy.device(), scatter_add, detail::for_compute(dy), dim, idx.contiguous(), dx);
  return dx.to(dy.dtype());
}

}  // namespace sprig
