// The parity tables of the elementwise ops (GPU only: no kernel of theirs is emulated), f32 and
// bf16 on awkward shapes: every unary op and its backward, the binary ops with broadcast operands
// and their backward, binary_scalar both ways round, where, masked_fill and where's backward;
// strided operands beside contiguous ones.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensor/ops.h"
#include "tests/parity/parity.h"

namespace sprig::parity {

inline const std::vector<Shape>& elementwise_shapes() {
  static const std::vector<Shape> shapes{{1}, {17, 33}, {97, 31}, {1025, 17}, {3, 1, 1025}};
  return shapes;
}
inline const std::vector<BinaryOp>& binary_ops() {
  static const std::vector<BinaryOp> ops{BinaryOp::add, BinaryOp::sub, BinaryOp::mul,
                                         BinaryOp::div};
  return ops;
}

inline std::vector<Case> unary_cases() {
  using testing::non_contiguous;
  std::vector<Case> cases;
  for (DType dt : {DType::f32, DType::bf16})
    for (const Shape& shape : elementwise_shapes())
      for (UnaryOp op :
           {UnaryOp::neg, UnaryOp::exp, UnaryOp::log, UnaryOp::sqrt, UnaryOp::rsqrt, UnaryOp::tanh,
            UnaryOp::sigmoid, UnaryOp::silu, UnaryOp::pow, UnaryOp::abs})
        cases.push_back(
            {case_name(unary_op_name(op), dt, shape), kCuda, [=](Backend b) {
               // Inputs valid for the op: positive where it needs them.
               const bool positive = op == UnaryOp::log || op == UnaryOp::sqrt ||
                                     op == UnaryOp::rsqrt || op == UnaryOp::pow;
               const Tensor x = on(b, positive ? testing::rand_uniform(shape, 0.5, 2.0, 1, dt)
                                               : testing::rand_normal(shape, 1, dt));
               const Tensor dy = on(b, testing::rand_normal(shape, 2, dt));
               const double p = 1.5;
               const Tensor y = unary(op, x, p);
               return std::vector<Output>{
                   {"y", y},
                   {"y strided", unary(op, non_contiguous(x), p)},
                   {"dx", unary_backward(op, x, y, dy, p)},
                   {"dx strided", unary_backward(op, non_contiguous(x), y, non_contiguous(dy), p)}};
             }});
  return cases;
}

inline std::vector<Case> binary_cases() {
  using testing::non_contiguous;
  const std::vector<std::pair<Shape, Shape>> pairs{
      {{17, 33}, {33}}, {{97, 1}, {1, 31}}, {{1025}, {1025}}, {{2, 1, 3}, {4, 3}}, {{1}, {31, 1}}};
  std::vector<Case> cases;
  for (DType dt : {DType::f32, DType::bf16})
    for (const auto& [a_shape, b_shape] : pairs)
      for (BinaryOp op : binary_ops()) {
        const std::string name =
            case_name(binary_op_name(op), dt, a_shape) + " with " + shape_str(b_shape);
        cases.push_back({name, kCuda, [=](Backend on_) {
                           const Tensor a = on(on_, testing::rand_normal(a_shape, 4, dt));
                           // A safe divisor.
                           const Tensor b =
                               on(on_, testing::rand_uniform(b_shape, 0.5, 2.0, 5, dt));
                           const Tensor out = binary(op, a, b);
                           const Tensor dy = on(on_, testing::rand_normal(out.shape(), 6, dt));
                           const auto [da, db] = binary_backward(op, a, b, dy);
                           return std::vector<Output>{
                               {"out", out},
                               {"out strided", binary(op, non_contiguous(a), non_contiguous(b))},
                               {"da", da},
                               {"db", db}};
                         }});
      }
  return cases;
}

inline std::vector<Case> binary_scalar_cases() {
  using testing::non_contiguous;
  std::vector<Case> cases;
  for (DType dt : {DType::f32, DType::bf16})
    for (const Shape& shape : elementwise_shapes())
      for (BinaryOp op : binary_ops())
        for (bool scalar_first : {false, true}) {
          const std::string name = case_name(binary_op_name(op), dt, shape) +
                                   (scalar_first ? " scalar first" : " scalar second");
          cases.push_back(
              {name, kCuda, [=](Backend b) {
                 const Tensor x = on(b, testing::rand_uniform(shape, 0.5, 2.0, 7, dt));
                 return std::vector<Output>{
                     {"out", binary_scalar(op, x, 1.75, scalar_first)},
                     {"out strided", binary_scalar(op, non_contiguous(x), 1.75, scalar_first)}};
               }});
        }
  return cases;
}

// A bool tensor with a pseudo-random pattern.
inline Tensor random_mask(const Shape& shape, uint64_t seed) {
  const std::vector<float> u = testing::rand_uniform(shape, 0, 1, seed).to_vector<float>();
  std::vector<bool> bits;
  for (float v : u) bits.push_back(v < 0.5f);
  return Tensor::from_vector(bits, shape);
}

inline std::vector<Case> where_cases() {
  using testing::non_contiguous;
  std::vector<Case> cases;
  for (DType dt : {DType::f32, DType::bf16})
    cases.push_back({case_name("where", dt, {97, 33}), kCuda, [=](Backend on_) {
                       const Tensor cond = on(on_, random_mask({97, 1}, 8));
                       const Tensor a = on(on_, testing::rand_normal({97, 33}, 9, dt));
                       const Tensor b = on(on_, testing::rand_normal({33}, 10, dt));
                       const Tensor full_cond = on(on_, random_mask({97, 33}, 11));
                       const Tensor mask = on(on_, random_mask({33}, 12));
                       const Tensor dy = on(on_, testing::rand_normal({97, 33}, 13, dt));
                       const auto [da, db] = where_backward(cond, a.shape(), b.shape(), dy);
                       return std::vector<Output>{{"where", where(cond, a, b)},
                                                  {"where strided", where(non_contiguous(full_cond),
                                                                          non_contiguous(a), b)},
                                                  {"masked_fill", masked_fill(a, mask, -1e4)},
                                                  {"da", da},
                                                  {"db", db}};
                     }});
  cases.push_back({"where i64 [1025]", kCuda, [](Backend b) {
                     const Tensor cond = on(b, random_mask({1025}, 14));
                     return std::vector<Output>{{"where",
                                                 where(cond, on(b, Tensor::arange(1025)),
                                                       on(b, Tensor::full({1}, -1, DType::i64))),
                                                 1, 1.0, true}};
                   }});
  return cases;
}

}  // namespace sprig::parity
