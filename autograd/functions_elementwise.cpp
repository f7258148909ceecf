// Differentiable elementwise functions: unary, binary (broadcasting), scalar, where, masked_fill,
// cast. Each is its forward op followed by its backward.
#include "autograd/functions.h"

namespace sprig {

Var unary(UnaryOp op, const Var& x, double exponent) {
  const Tensor xv = x.value();
  const Tensor y = unary(op, xv, exponent);
  return record(unary_op_name(op), y, {x}, [op, xv, y, exponent](const Tensor& dy) -> Grads {
    return {unary_backward(op, xv, y, dy, exponent)};
  });
}

Var binary(BinaryOp op, const Var& a, const Var& b) {
  const Tensor av = a.value(), bv = b.value();
  const Tensor y = binary(op, av, bv);
  if (op == BinaryOp::add || op == BinaryOp::sub) {  // needs only the shapes: keeps no input alive
    return record(binary_op_name(op), y, {a, b},
                  [op, a_shape = av.shape(), b_shape = bv.shape()](const Tensor& dy) -> Grads {
                    const Tensor db = sum_to(dy, b_shape);
                    return {sum_to(dy, a_shape), op == BinaryOp::add ? db : neg(db)};
                  });
  }
  return record(binary_op_name(op), y, {a, b}, [op, av, bv](const Tensor& dy) -> Grads {
    auto [da, db] = binary_backward(op, av, bv, dy);
    return {da, db};
  });
}

Var binary_scalar(BinaryOp op, const Var& x, double s, bool scalar_first) {
  const Tensor xv = x.value();
  const Tensor y = binary_scalar(op, xv, s, scalar_first);
  const char* name = binary_op_name(op);
  switch (op) {
    case BinaryOp::add: return record(name, y, {x}, [](const Tensor& dy) -> Grads { return {dy}; });
    case BinaryOp::sub:
      return record(name, y, {x}, [scalar_first](const Tensor& dy) -> Grads {
        return {scalar_first ? neg(dy) : dy};
      });
    case BinaryOp::mul:
      return record(name, y, {x}, [s](const Tensor& dy) -> Grads { return {mul(dy, s)}; });
    case BinaryOp::div: break;
  }
  if (!scalar_first)
    return record(name, y, {x}, [s](const Tensor& dy) -> Grads { return {div(dy, s)}; });
  // d(s / x)/dx = -s / x^2 = -y / x
  return record(name, y, {x},
                [xv, y](const Tensor& dy) -> Grads { return {neg(div(mul(dy, y), xv))}; });
}

Var where(const Tensor& cond, const Var& a, const Var& b) {
  const Tensor y = where(cond, a.value(), b.value());
  return record("where", y, {a, b},
                [cond, a_shape = a.shape(), b_shape = b.shape()](const Tensor& dy) -> Grads {
                  auto [da, db] = where_backward(cond, a_shape, b_shape, dy);
                  return {da, db};
                });
}

Var masked_fill(const Var& x, const Tensor& mask, double value) {
  return record("masked_fill", masked_fill(x.value(), mask, value), {x},
                [mask](const Tensor& dy) -> Grads { return {masked_fill(dy, mask, 0.0)}; });
}

Var cast(const Var& x, DType dtype) {
  return record("cast", cast(x.value(), dtype), {x},
                [x_dtype = x.dtype()](const Tensor& dy) -> Grads { return {cast(dy, x_dtype)}; });
}

}  // namespace sprig
