// Gradient checks (f64, central differences) of the view functions, concat / split and the
// indexing functions (embedding with repeated ids, index_select, gather).
#include <gtest/gtest.h>

#include "tests/autograd/gradcheck_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::grad_ok;
using testing::randn64;

using Inputs = const std::vector<Var>&;

TEST(ShapeGrad, ReshapeAndView) {
  const Tensor x = randn64({2, 3, 4}, 1);
  EXPECT_TRUE(grad_ok([](Inputs in) { return view(in[0], {6, 4}); }, {x}));
  EXPECT_TRUE(grad_ok([](Inputs in) { return reshape(in[0], {4, -1}); }, {x}));
  // reshape of a non-contiguous view copies; the gradient still maps back element by element.
  EXPECT_TRUE(grad_ok([](Inputs in) { return reshape(transpose(in[0], 0, 2), {-1}); }, {x}));
}

TEST(ShapeGrad, TransposePermuteContiguous) {
  const Tensor x = randn64({2, 3, 4}, 2);
  EXPECT_TRUE(grad_ok([](Inputs in) { return transpose(in[0], 0, -1); }, {x}));
  EXPECT_TRUE(grad_ok([](Inputs in) { return permute(in[0], {1, 2, 0}); }, {x}));
  EXPECT_TRUE(grad_ok([](Inputs in) { return contiguous(permute(in[0], {2, 0, 1})); }, {x}));
}

TEST(ShapeGrad, SliceNarrowSelect) {
  const Tensor x = randn64({4, 5}, 3);
  EXPECT_TRUE(grad_ok([](Inputs in) { return slice(in[0], 1, 1, 5, 2); }, {x}));
  EXPECT_TRUE(grad_ok([](Inputs in) { return slice(in[0], 0, -3, 4); }, {x}));
  EXPECT_TRUE(grad_ok([](Inputs in) { return narrow(in[0], 0, 1, 2); }, {x}));
  EXPECT_TRUE(grad_ok([](Inputs in) { return select(in[0], 1, 3); }, {x}));
  // The gradient is zero outside the selected region.
  Var v(Tensor::zeros({2, 3}, DType::f64), true);
  narrow(v, 1, 1, 1).backward(Tensor::ones({2, 1}, DType::f64));
  EXPECT_TRUE(all_close(v.grad(), Tensor::from_vector<double>({0, 1, 0, 0, 1, 0}, {2, 3}), 0));
}

TEST(ShapeGrad, ExpandUnsqueezeSqueeze) {
  EXPECT_TRUE(grad_ok([](Inputs in) { return expand(in[0], {2, 3, 4}); }, {randn64({3, 1}, 4)}));
  EXPECT_TRUE(grad_ok([](Inputs in) { return unsqueeze(in[0], 1); }, {randn64({3, 4}, 5)}));
  EXPECT_TRUE(grad_ok([](Inputs in) { return squeeze(in[0], 0); }, {randn64({1, 3, 4}, 6)}));
}

TEST(ShapeGrad, ConcatAndSplit) {
  EXPECT_TRUE(grad_ok(
      [](Inputs in) {
        return concat({in[0], in[1], in[2]}, 1);
      },
      {randn64({2, 1, 3}, 7), randn64({2, 2, 3}, 8), randn64({2, 3, 3}, 9)}));
  // Pieces reordered and reweighted: each piece's gradient must land in its own range.
  EXPECT_TRUE(grad_ok(
      [](Inputs in) {
        const std::vector<Var> p = split(in[0], {1, 3, 2}, -1);
        return concat({p[2] * 2.0, p[0], exp(p[1])}, -1);
      },
      {randn64({3, 6}, 10)}));
}

TEST(ShapeGrad, EmbeddingWithRepeatedIds) {
  const Tensor ids = Tensor::from_vector<int64_t>({1, 3, 1, 0, 3, 1}, {2, 3});
  EXPECT_TRUE(grad_ok([ids](Inputs in) { return embedding(in[0], ids); }, {randn64({5, 3}, 11)}));
  // Rows 2 and 4 are never looked up: exactly zero gradient; row 1 sums three lookups.
  Var w(randn64({5, 3}, 12), true);
  embedding(w, ids).backward(Tensor::ones({2, 3, 3}, DType::f64));
  const std::vector<double> counts = {1, 3, 0, 2, 0};
  for (int64_t v = 0; v < 5; ++v)
    EXPECT_TRUE(all_close(w.grad().select(0, v), Tensor::full({3}, counts[v], DType::f64), 0))
        << "row " << v;
}

TEST(ShapeGrad, IndexSelect) {
  const Tensor idx = Tensor::from_vector<int64_t>({2, 0, 2}, {3});
  for (int64_t dim : {0, 1}) {
    SCOPED_TRACE(dim);
    EXPECT_TRUE(grad_ok([idx, dim](Inputs in) { return index_select(in[0], dim, idx); },
                        {randn64({3, 4}, 13)}));
  }
}

TEST(ShapeGrad, Gather) {
  const Tensor idx = Tensor::from_vector<int64_t>({0, 3, 3, 1, 2, 2, 2, 0, 1}, {3, 3});
  EXPECT_TRUE(grad_ok([idx](Inputs in) { return gather(in[0], 1, idx); }, {randn64({3, 4}, 14)}));
  const Tensor idx0 = Tensor::from_vector<int64_t>({2, 0, 1, 2}, {1, 4});
  EXPECT_TRUE(grad_ok([idx0](Inputs in) { return gather(in[0], 0, idx0); }, {randn64({3, 4}, 15)}));
}

}  // namespace
}  // namespace sprig
