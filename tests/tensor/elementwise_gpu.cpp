// GPU parity of the elementwise ops: every unary and binary op, binary_scalar, where /
// masked_fill and every backward on CUDA against the CPU reference, in f32 and bf16, on awkward
// shapes, with broadcast and non-contiguous operands.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tensor/cuda/kernels.h"
#include "tensor/ops.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::non_contiguous;
using testing::rand_normal;
using testing::rand_uniform;

const Device kGpu = Device::cuda();
const std::vector<DType> kDtypes{DType::f32, DType::bf16};
const std::vector<Shape> kShapes{{1}, {17, 33}, {97, 31}, {1025, 17}, {3, 1, 1025}};

std::string trace(const char* op, DType dtype, const Shape& shape) {
  return std::string(op) + " " + dtype_name(dtype) + " " + shape_str(shape);
}

// Inputs valid for op (positive where the op needs it).
Tensor input_for(UnaryOp op, const Shape& shape, uint64_t seed, DType dtype) {
  const bool positive =
      op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt || op == UnaryOp::pow;
  return positive ? rand_uniform(shape, 0.5, 2.0, seed, dtype) : rand_normal(shape, seed, dtype);
}

const std::vector<UnaryOp> kUnaryOps{UnaryOp::neg,   UnaryOp::exp,  UnaryOp::log,     UnaryOp::sqrt,
                                     UnaryOp::rsqrt, UnaryOp::tanh, UnaryOp::sigmoid, UnaryOp::silu,
                                     UnaryOp::pow,   UnaryOp::abs};
const std::vector<BinaryOp> kBinaryOps{BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div};

TEST(ElementwiseGpu, UnaryAndBackwardMatchCpu) {
  SPRIG_REQUIRE_CUDA();
  for (DType dtype : kDtypes) {
    for (const Shape& shape : kShapes) {
      for (UnaryOp op : kUnaryOps) {
        SCOPED_TRACE(trace(unary_op_name(op), dtype, shape));
        const double p = 1.5;
        const Tensor x = input_for(op, shape, 1, dtype), dy = rand_normal(shape, 2, dtype);
        const Tensor y = unary(op, x, p);
        const Tensor xg = x.to(kGpu), yg = unary(op, xg, p);
        EXPECT_PARITY(yg, y);
        EXPECT_PARITY(unary(op, non_contiguous(xg), p), y);
        EXPECT_PARITY(unary_backward(op, xg, yg, dy.to(kGpu), p), unary_backward(op, x, y, dy, p));
        const Tensor strided_dx =
            unary_backward(op, non_contiguous(xg), yg, non_contiguous(dy.to(kGpu)), p);
        EXPECT_PARITY(strided_dx, unary_backward(op, x, y, dy, p));
      }
    }
  }
}

TEST(ElementwiseGpu, KernelsRunInPlaceOnStridedTensors) {
  SPRIG_REQUIRE_CUDA();
  const Tensor x = rand_normal({33, 17}, 3);
  const Tensor xg = non_contiguous(x.to(kGpu));
  const cudaStream_t stream = cuda::current_stream(0);
  cuda::unary(UnaryOp::tanh, xg, xg, 0.0, stream);
  cuda::binary_scalar(BinaryOp::sub, xg, 2.0, /*scalar_first=*/true, xg, stream);
  EXPECT_PARITY(xg, binary_scalar(BinaryOp::sub, tanh(x), 2.0, true));
}

TEST(ElementwiseGpu, BinaryAndBackwardWithBroadcastMatchCpu) {
  SPRIG_REQUIRE_CUDA();
  const std::vector<std::pair<Shape, Shape>> pairs{
      {{17, 33}, {33}}, {{97, 1}, {1, 31}}, {{1025}, {1025}}, {{2, 1, 3}, {4, 3}}, {{1}, {31, 1}}};
  for (DType dtype : kDtypes) {
    for (const auto& [a_shape, b_shape] : pairs) {
      for (BinaryOp op : kBinaryOps) {
        SCOPED_TRACE(trace(binary_op_name(op), dtype, a_shape) + " with " + shape_str(b_shape));
        const Tensor a = rand_normal(a_shape, 4, dtype);
        const Tensor b = rand_uniform(b_shape, 0.5, 2.0, 5, dtype);  // a safe divisor
        const Tensor ag = a.to(kGpu), bg = b.to(kGpu);
        const Tensor out = binary(op, a, b);
        EXPECT_PARITY(binary(op, ag, bg), out);
        EXPECT_PARITY(binary(op, non_contiguous(ag), non_contiguous(bg)), out);
        const Tensor dy = rand_normal(out.shape(), 6, dtype);
        const auto [da, db] = binary_backward(op, a, b, dy);
        const auto [dag, dbg] = binary_backward(op, ag, bg, dy.to(kGpu));
        EXPECT_PARITY(dag, da);
        EXPECT_PARITY(dbg, db);
      }
    }
  }
}

TEST(ElementwiseGpu, BinaryScalarMatchesCpu) {
  SPRIG_REQUIRE_CUDA();
  for (DType dtype : kDtypes) {
    for (const Shape& shape : kShapes) {
      for (BinaryOp op : kBinaryOps) {
        for (bool scalar_first : {false, true}) {
          SCOPED_TRACE(trace(binary_op_name(op), dtype, shape) + (scalar_first ? " s op x" : ""));
          const Tensor x = rand_uniform(shape, 0.5, 2.0, 7, dtype);
          const Tensor expected = binary_scalar(op, x, 1.75, scalar_first);
          EXPECT_PARITY(binary_scalar(op, x.to(kGpu), 1.75, scalar_first), expected);
          EXPECT_PARITY(binary_scalar(op, non_contiguous(x.to(kGpu)), 1.75, scalar_first),
                        expected);
        }
      }
    }
  }
}

// A bool tensor with a pseudo-random pattern.
Tensor random_mask(const Shape& shape, uint64_t seed) {
  const std::vector<float> u = rand_uniform(shape, 0, 1, seed).to_vector<float>();
  std::vector<bool> bits;
  for (float v : u) bits.push_back(v < 0.5f);
  return Tensor::from_vector(bits, shape);
}

TEST(ElementwiseGpu, WhereMaskedFillAndBackwardMatchCpu) {
  SPRIG_REQUIRE_CUDA();
  for (DType dtype : kDtypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor cond = random_mask({97, 1}, 8), a = rand_normal({97, 33}, 9, dtype);
    const Tensor b = rand_normal({33}, 10, dtype);
    const Tensor condg = cond.to(kGpu), ag = a.to(kGpu), bg = b.to(kGpu);
    EXPECT_PARITY(where(condg, ag, bg), where(cond, a, b));
    const Tensor full_cond = random_mask({97, 33}, 11);
    EXPECT_PARITY(where(non_contiguous(full_cond.to(kGpu)), non_contiguous(ag), bg),
                  where(full_cond, a, b));
    const Tensor mask = random_mask({33}, 12);
    EXPECT_PARITY(masked_fill(ag, mask.to(kGpu), -1e4), masked_fill(a, mask, -1e4));
    const Tensor dy = rand_normal({97, 33}, 13, dtype);
    const auto [da, db] = where_backward(cond, a.shape(), b.shape(), dy);
    const auto [dag, dbg] = where_backward(condg, a.shape(), b.shape(), dy.to(kGpu));
    EXPECT_PARITY(dag, da);
    EXPECT_PARITY(dbg, db);
  }
  const Tensor ids = Tensor::arange(1025);
  const Tensor cond = random_mask({1025}, 14);
  EXPECT_EQ(where(cond.to(kGpu), ids.to(kGpu), Tensor::full({1}, -1, DType::i64, kGpu))
                .to_vector<int64_t>(),
            where(cond, ids, Tensor::full({1}, -1, DType::i64)).to_vector<int64_t>());
}

}  // namespace
}  // namespace sprig
