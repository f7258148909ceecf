// Differentiable view ops (reshape, transpose, slice, expand, ...), concat / split, and indexing
// (embedding, index_select, gather). Each is its forward followed by its backward.
#include "autograd/functions.h"

namespace sprig {
namespace {

// A view whose gradient is dy reshaped back to x's shape.
Var reshaped_view(const char* op, const Var& x, Tensor value) {
  return record(op, std::move(value), {x},
                [x_shape = x.shape()](const Tensor& dy) -> Grads { return {dy.reshape(x_shape)}; });
}

// A view selecting part of x: its gradient is dy written into zeros of x's shape at
// region(zeros), a function returning the same view of its argument.
template <class Region> Var region_view(const char* op, const Var& x, Region region) {
  return record(op, region(x.value()), {x},
                [x_shape = x.shape(), region](const Tensor& dy) -> Grads {
                  Tensor dx = Tensor::zeros(x_shape, dy.dtype(), dy.device());
                  region(dx).copy_(dy);
                  return {dx};
                });
}

}  // namespace

Var view(const Var& x, const Shape& shape) {
  return reshaped_view("view", x, x.value().view(shape));
}

Var reshape(const Var& x, const Shape& shape) {
  return reshaped_view("reshape", x, x.value().reshape(shape));
}

Var unsqueeze(const Var& x, int64_t dim) {
  return reshaped_view("unsqueeze", x, x.value().unsqueeze(dim));
}

Var squeeze(const Var& x, int64_t dim) {
  return reshaped_view("squeeze", x, x.value().squeeze(dim));
}

Var contiguous(const Var& x) {
  return record("contiguous", x.value().contiguous(), {x},
                [](const Tensor& dy) -> Grads { return {dy}; });
}

Var transpose(const Var& x, int64_t d0, int64_t d1) {
  return record("transpose", x.value().transpose(d0, d1), {x},
                [d0, d1](const Tensor& dy) -> Grads { return {dy.transpose(d0, d1)}; });
}

Var permute(const Var& x, const std::vector<int64_t>& dims) {
  const Tensor y = x.value().permute(dims);  // validates dims
  std::vector<int64_t> inverse(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inverse[normalize_dim(dims[i], x.dim(), "permute")] = static_cast<int64_t>(i);
  return record("permute", y, {x},
                [inverse](const Tensor& dy) -> Grads { return {dy.permute(inverse)}; });
}

Var slice(const Var& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return region_view("slice", x, [=](const Tensor& t) { return t.slice(dim, start, end, step); });
}

Var narrow(const Var& x, int64_t dim, int64_t start, int64_t length) {
  return region_view("narrow", x, [=](const Tensor& t) { return t.narrow(dim, start, length); });
}

Var select(const Var& x, int64_t dim, int64_t index) {
  return region_view("select", x, [=](const Tensor& t) { return t.select(dim, index); });
}

Var expand(const Var& x, const Shape& shape) {
  return record("expand", x.value().expand(shape), {x},
                [x_shape = x.shape()](const Tensor& dy) -> Grads { return {sum_to(dy, x_shape)}; });
}

Var concat(const std::vector<Var>& xs, int64_t dim) {
  std::vector<Tensor> values;
  for (const Var& x : xs) values.push_back(x.value());
  const Tensor y = concat(values, dim);
  std::vector<int64_t> sizes;
  for (const Tensor& v : values) sizes.push_back(v.size(dim));
  return record("concat", y, xs,
                [sizes, dim](const Tensor& dy) -> Grads { return split(dy, sizes, dim); });
}

std::vector<Var> split(const Var& x, const std::vector<int64_t>& sizes, int64_t dim) {
  split(x.value(), sizes, dim);  // validates sizes against x
  std::vector<Var> pieces;
  int64_t start = 0;
  for (int64_t size : sizes) {
    pieces.push_back(narrow(x, dim, start, size));
    start += size;
  }
  return pieces;
}

Var embedding(const Var& weight, const Tensor& ids) {
  return record("embedding", embedding(weight.value(), ids), {weight},
                [ids, w_shape = weight.shape()](const Tensor& dy) -> Grads {
                  Tensor dw = Tensor::zeros(w_shape, dy.dtype(), dy.device());
                  embedding_backward(dy, ids, dw);
                  return {dw};
                });
}

Var index_select(const Var& x, int64_t dim, const Tensor& idx) {
  return record("index_select", index_select(x.value(), dim, idx), {x},
                [x_shape = x.shape(), dim, idx](const Tensor& dy) -> Grads {
                  return {index_select_backward(dy, x_shape, dim, idx)};
                });
}

Var gather(const Var& x, int64_t dim, const Tensor& idx) {
  return record("gather", gather(x.value(), dim, idx), {x},
                [x_shape = x.shape(), dim, idx](const Tensor& dy) -> Grads {
                  return {gather_backward(dy, x_shape, dim, idx)};
                });
}

}  // namespace sprig
