// Elementwise ops: unary and binary arithmetic with NumPy broadcasting, where / masked_fill, and
// their backward functions. binary_backward and where_backward compose forward ops and sum_to.
// On CPU, 16-bit floats compute in f32 and the result is cast back to the input dtype.
#include <algorithm>
#include <string>

#include "tensor/ops.h"
#include "tensor/ops/dispatch.h"

namespace sprig {

namespace {

// The tensor the kernel computes on: x itself, or an f32 copy of a 16-bit CPU tensor.
Tensor compute_input(const Tensor& x) { return x.to(detail::compute_dtype(x)); }

// Checks that a and b are defined floating tensors of one dtype and device.
void check_pair(const char* op, const Tensor& a, const char* a_name, const Tensor& b,
                const char* b_name) {
  detail::check_float_input(op, a, a_name);
  detail::check_defined(op, b, b_name);
  detail::check_same_device(op, {&a, &b});
  detail::check_same_dtype(op, a, b);
}

void check_bool(const char* op, const Tensor& t, const char* name) {
  detail::check_defined(op, t, name);
  if (t.dtype() != DType::boolean)
    detail::fail(op, std::string(name) + " must be bool, got " + dtype_name(t.dtype()));
}

}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t ndim = std::max(a.size(), b.size());
  Shape out(ndim);
  for (size_t i = 0; i < ndim; ++i) {
    // Dimension i counted from the end; missing leading dimensions act as size 1.
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      detail::fail(op, "shapes " + shape_str(a) + " and " + shape_str(b) + " do not broadcast");
    out[ndim - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  detail::check_defined("sum_to", x, "x");
  if (broadcast_shapes(x.shape(), shape, "sum_to") != x.shape())
    detail::fail("sum_to", "cannot sum " + shape_str(x.shape()) + " to " + shape_str(shape));
  if (x.shape() == shape) return x;
  // Leading dimensions that `shape` lacks are flattened into one and summed away together.
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  Tensor r = x;
  if (lead > 0) {
    Shape folded{-1};
    folded.insert(folded.end(), x.shape().begin() + lead, x.shape().end());
    r = sum(x.reshape(folded), 0);
  }
  for (int64_t d = 0; d < r.dim(); ++d)
    if (shape[d] == 1 && r.size(d) != 1) r = sum(r, d, /*keepdim=*/true);
  return r;
}

Tensor unary(UnaryOp op, const Tensor& x, double exponent) {
  const char* name = unary_op_name(op);
  detail::check_float_input(name, x, "x");
  const Tensor xc = compute_input(x);
  const Tensor y = Tensor::empty(x.shape(), xc.dtype(), x.device());
  SPRIG_DISPATCH(x.device(), unary, op, xc, y, exponent);
  return y.to(x.dtype());
}

Tensor unary_backward(UnaryOp op, const Tensor& x, const Tensor& y, const Tensor& dy,
                      double exponent) {
  const std::string name = std::string(unary_op_name(op)) + "_backward";
  check_pair(name.c_str(), x, "x", y, "y");
  check_pair(name.c_str(), x, "x", dy, "dy");
  detail::check_shape(name.c_str(), y, x.shape(), "y");
  detail::check_shape(name.c_str(), dy, x.shape(), "dy");
  const Tensor xc = compute_input(x), yc = compute_input(y), dyc = compute_input(dy);
  const Tensor dx = Tensor::empty(x.shape(), xc.dtype(), x.device());
  SPRIG_DISPATCH(x.device(), unary_backward, op, xc, yc, dyc, dx, exponent);
  return dx.to(x.dtype());
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const char* name = binary_op_name(op);
  check_pair(name, a, "a", b, "b");
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  const Tensor ac = compute_input(a).expand(shape), bc = compute_input(b).expand(shape);
  const Tensor out = Tensor::empty(shape, ac.dtype(), a.device());
  SPRIG_DISPATCH(a.device(), binary, op, ac, bc, out);
  return out.to(a.dtype());
}

std::pair<Tensor, Tensor> binary_backward(BinaryOp op, const Tensor& a, const Tensor& b,
                                          const Tensor& dy) {
  const std::string name = std::string(binary_op_name(op)) + "_backward";
  check_pair(name.c_str(), a, "a", b, "b");
  check_pair(name.c_str(), a, "a", dy, "dy");
  detail::check_shape(name.c_str(), dy, broadcast_shapes(a.shape(), b.shape(), name.c_str()), "dy");
  switch (op) {
    case BinaryOp::add: return {sum_to(dy, a.shape()), sum_to(dy, b.shape())};
    case BinaryOp::sub: return {sum_to(dy, a.shape()), sum_to(neg(dy), b.shape())};
    case BinaryOp::mul: return {sum_to(mul(dy, b), a.shape()), sum_to(mul(dy, a), b.shape())};
    case BinaryOp::div: {
      const Tensor da = div(dy, b);  // d(a/b)/db = -a/b^2 = -(1/b) * (a/b)
      return {sum_to(da, a.shape()), sum_to(neg(mul(da, div(a, b))), b.shape())};
    }
  }
  return {};
}

Tensor binary_scalar(BinaryOp op, const Tensor& x, double s, bool scalar_first) {
  const char* name = binary_op_name(op);
  detail::check_float_input(name, x, "x");
  const Tensor xc = compute_input(x);
  const Tensor out = Tensor::empty(x.shape(), xc.dtype(), x.device());
  SPRIG_DISPATCH(x.device(), binary_scalar, op, xc, s, scalar_first, out);
  return out.to(x.dtype());
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_bool("where", cond, "cond");
  detail::check_defined("where", a, "a");
  detail::check_defined("where", b, "b");
  detail::check_same_device("where", {&cond, &a, &b});
  detail::check_same_dtype("where", a, b);
  const Shape shape =
      broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  const Tensor out = Tensor::empty(shape, a.dtype(), a.device());
  SPRIG_DISPATCH(a.device(), where, cond.expand(shape), a.expand(shape), b.expand(shape), out);
  return out;
}

std::pair<Tensor, Tensor> where_backward(const Tensor& cond, const Shape& a_shape,
                                         const Shape& b_shape, const Tensor& dy) {
  check_bool("where_backward", cond, "cond");
  detail::check_float_input("where_backward", dy, "dy");
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a_shape, "where_backward"),
                                       b_shape, "where_backward");
  detail::check_shape("where_backward", dy, shape, "dy");
  const Tensor zero = Tensor::scalar(0.0, dy.dtype(), dy.device());
  return {sum_to(where(cond, dy, zero), a_shape), sum_to(where(cond, zero, dy), b_shape)};
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  detail::check_defined("masked_fill", x, "x");
  check_bool("masked_fill", mask, "mask");
  if (broadcast_shapes(x.shape(), mask.shape(), "masked_fill") != x.shape())
    detail::fail("masked_fill", "mask shape " + shape_str(mask.shape()) +
                                    " does not broadcast to x shape " + shape_str(x.shape()));
  return where(mask, Tensor::scalar(value, x.dtype(), x.device()), x);
}

}  // namespace sprig
