// CPU tests of the indexing ops (embedding, concat, split, index_select, gather and their
// backwards) against hand-computed values and naive loops written here, plus bad-input errors.
#include <gtest/gtest.h>

#include "tensor/ops.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::invalid_argument_message;

Tensor f32(const std::vector<float>& v, const Shape& shape, DType dtype = DType::f32) {
  return Tensor::from_vector(v, shape, dtype);
}
Tensor i64(const std::vector<int64_t>& v, const Shape& shape) {
  return Tensor::from_vector(v, shape);
}

// [v, h] table with value 10 * row + column (exact in every floating dtype).
Tensor table(int64_t v, int64_t h, DType dtype = DType::f32) {
  std::vector<float> values;
  for (int64_t r = 0; r < v; ++r)
    for (int64_t c = 0; c < h; ++c) values.push_back(static_cast<float>(10 * r + c));
  return f32(values, {v, h}, dtype);
}

// ---- embedding ----------------------------------------------------------------------------------

TEST(Embedding, PicksRowsForI64AndI32Ids) {
  const Tensor w = table(4, 3);
  const Tensor expected = f32({10, 11, 12, 30, 31, 32, 0, 1, 2, 10, 11, 12}, {2, 2, 3});
  const std::vector<int64_t> ids = {1, 3, 0, 1};
  EXPECT_TRUE(all_close(embedding(w, i64(ids, {2, 2})), expected, 0));
  EXPECT_TRUE(all_close(embedding(w, Tensor::from_vector(ids, {2, 2}, DType::i32)), expected, 0));
}

TEST(Embedding, Bf16AndStridedWeight) {
  const Tensor out = embedding(table(4, 3, DType::bf16), i64({2, 2}, {2}));
  EXPECT_EQ(out.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(out, f32({20, 21, 22, 20, 21, 22}, {2, 3}), 0));
  // w.t() of a [3, 4] table: row r of the view is column r of the table.
  const Tensor strided = table(3, 4).t();
  EXPECT_TRUE(all_close(embedding(strided, i64({3}, {1})), f32({3, 13, 23}, {1, 3}), 0));
}

TEST(Embedding, BackwardAccumulatesRepeatedIds) {
  const Tensor dy = f32({1, 2, 3, 4, 5, 6}, {3, 2});
  const Tensor ids = i64({2, 0, 2}, {3});
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    const Tensor dw = Tensor::ones({3, 2}, dtype);
    embedding_backward(dy.to(dtype), ids, dw);
    EXPECT_TRUE(all_close(dw, f32({4, 5, 1, 1, 7, 9}, {3, 2}), 0)) << dtype_name(dtype);
  }
  // A strided dweight is updated in place through its view.
  const Tensor buffer = Tensor::zeros({2, 3});
  embedding_backward(dy, ids, buffer.t());
  EXPECT_TRUE(all_close(buffer, f32({3, 0, 6, 4, 0, 8}, {2, 3}), 0));
}

TEST(Embedding, LargeBackwardMatchesLoops) {
  // Big enough for the threaded path, with H = 300 spanning two column chunks; 7 rows get
  // many repeated ids.
  const int64_t N = 120, H = 300, V = 7;
  const Tensor dy = testing::rand_normal({N, H}, 3);
  const Tensor ids = randint({N}, 0, V);
  const std::vector<double> g = dy.to_vector<double>();
  const std::vector<int64_t> id = ids.to_vector<int64_t>();
  std::vector<double> expected(V * H, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) expected[id[n] * H + h] += g[n * H + h];
  const Tensor dw = Tensor::zeros({V, H});
  embedding_backward(dy, ids, dw);
  EXPECT_TRUE(all_close(dw, Tensor::from_vector(expected, {V, H}), 1e-4));
  EXPECT_TRUE(all_close(embedding(dw, ids), index_select(dw, 0, ids), 0));
}

TEST(Embedding, RejectsBadInputs) {
  const Tensor w = Tensor::zeros({64, 2});
  EXPECT_EQ(invalid_argument_message([&] {
              embedding(w, i64({1, 2, 3, 70}, {4}));
            }),
            "[embedding] id 70 out of range [0, 64) at position 3");
  EXPECT_EQ(invalid_argument_message([&] {
              embedding(w, i64({0, -1}, {1, 2}));
            }),
            "[embedding] id -1 out of range [0, 64) at position 1");
  EXPECT_EQ(invalid_argument_message([&] { embedding(w, f32({1}, {1})); }),
            "[embedding] ids must be i32 or i64, got f32");
  EXPECT_EQ(invalid_argument_message([&] { embedding(Tensor::zeros({4}), i64({1}, {1})); }),
            "[embedding] weight must have 2 dimensions, got 1 (shape [4])");
  const Tensor ids = i64({1, 2, 3}, {3});
  EXPECT_EQ(invalid_argument_message([&] {
              embedding_backward(Tensor::zeros({3, 4}), ids, Tensor::zeros({64, 2}));
            }),
            "[embedding_backward] dy must have shape [3, 2], got [3, 4]");
  EXPECT_EQ(invalid_argument_message([&] {
              embedding_backward(Tensor::zeros({3, 2}), ids, Tensor::zeros({64, 2}, DType::f64));
            }),
            "[embedding_backward] dtype mismatch: f32 and f64");
  EXPECT_EQ(invalid_argument_message([&] {
              embedding_backward(Tensor::zeros({3, 2}), i64({9, 0, 0}, {3}), Tensor::zeros({8, 2}));
            }),
            "[embedding_backward] id 9 out of range [0, 8) at position 0");
}

// ---- concat / split -----------------------------------------------------------------------------

TEST(Concat, JoinsAlongAnyDim) {
  const Tensor a = f32({1, 2, 3, 4}, {2, 2}), b = f32({5, 6}, {1, 2});
  EXPECT_TRUE(all_close(concat({a, b}, 0), f32({1, 2, 3, 4, 5, 6}, {3, 2}), 0));
  // Along the last dim, with a strided input: a.t() is [[1, 3], [2, 4]].
  const Tensor c = f32({7, 8}, {2, 1});
  EXPECT_TRUE(all_close(concat({a.t(), c, a}, -1), f32({1, 3, 7, 1, 2, 2, 4, 8, 3, 4}, {2, 5}), 0));
}

TEST(Concat, RejectsBadInputs) {
  EXPECT_EQ(invalid_argument_message([] { concat({}, 0); }),
            "[concat] needs at least one tensor, got an empty list");
  const Tensor a = Tensor::zeros({2, 3});
  EXPECT_EQ(invalid_argument_message([&] {
              concat({a, Tensor::zeros({2, 4})}, 0);
            }),
            "[concat] tensor 1 has shape [2, 4], which differs from tensor 0's [2, 3] outside "
            "dim 0");
  EXPECT_EQ(invalid_argument_message([&] {
              concat({a, Tensor::zeros({6})}, 0);
            }),
            "[concat] tensor 1 has shape [6], which differs from tensor 0's [2, 3] outside dim 0");
  EXPECT_EQ(invalid_argument_message([&] {
              concat({a, Tensor::zeros({2, 3}, DType::f64)}, 1);
            }),
            "[concat] dtype mismatch: f32 and f64");
}

TEST(Split, ReturnsViewsOfThePieces) {
  const Tensor x = table(2, 5);
  const std::vector<Tensor> parts = split(x, {2, 0, 3}, 1);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_TRUE(all_close(parts[0], f32({0, 1, 10, 11}, {2, 2}), 0));
  EXPECT_EQ(parts[1].shape(), (Shape{2, 0}));
  EXPECT_TRUE(all_close(parts[2], f32({2, 3, 4, 12, 13, 14}, {2, 3}), 0));
  EXPECT_TRUE(parts[2].shares_storage(x));
  EXPECT_TRUE(all_close(concat(parts, 1), x, 0));
  EXPECT_EQ(invalid_argument_message([&] {
              split(x, {2, 2}, -1);
            }),
            "[split] sizes [2, 2] sum to 4, but dim 1 of [2, 5] has size 5");
}

// ---- index_select -------------------------------------------------------------------------------

// x.index_select(dim, idx) for a 3-D x, by loops over coordinates.
Tensor naive_index_select(const Tensor& x, int64_t dim, const std::vector<int64_t>& idx) {
  Shape shape = x.shape();
  shape[dim] = static_cast<int64_t>(idx.size());
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> out;
  for (int64_t i = 0; i < shape[0]; ++i)
    for (int64_t j = 0; j < shape[1]; ++j)
      for (int64_t k = 0; k < shape[2]; ++k) {
        int64_t c[3] = {i, j, k};
        c[dim] = idx[c[dim]];
        out.push_back(v[(c[0] * x.size(1) + c[1]) * x.size(2) + c[2]]);
      }
  return Tensor::from_vector(out, shape, x.dtype());
}

TEST(IndexSelect, MatchesLoopsAlongEveryDim) {
  const Tensor x = testing::rand_normal({3, 4, 5}, 1);
  const std::vector<int64_t> idx = {2, 0, 2, 1};
  for (int64_t dim = 0; dim < 3; ++dim) {
    const Tensor out = index_select(x, dim, i64(idx, {4}));
    EXPECT_TRUE(all_close(out, naive_index_select(x, dim, idx), 0)) << "dim " << dim;
    EXPECT_TRUE(
        all_close(index_select(testing::non_contiguous(x), dim - 3, i64(idx, {4})), out, 0));
  }
}

TEST(IndexSelect, BackwardAddsRepeatedRows) {
  // x [2, 3], dim 1, idx [2, 0, 2]: column 2 of dx gets dy's columns 0 and 2.
  const Tensor dy = f32({1, 2, 3, 4, 5, 6}, {2, 3});
  for (DType dtype : {DType::f32, DType::bf16}) {
    const Tensor dx = index_select_backward(dy.to(dtype), {2, 3}, 1, i64({2, 0, 2}, {3}));
    EXPECT_EQ(dx.dtype(), dtype);
    EXPECT_TRUE(all_close(dx, f32({2, 0, 4, 5, 0, 10}, {2, 3}), 0));
  }
}

TEST(IndexSelect, RejectsBadInputs) {
  const Tensor x = Tensor::zeros({2, 4});
  EXPECT_EQ(invalid_argument_message([&] {
              index_select(x, 1, i64({0, 5}, {2}));
            }),
            "[index_select] index 5 out of range [0, 4) at position 1");
  EXPECT_EQ(invalid_argument_message([&] {
              index_select(x, 0, i64({0, 1}, {1, 2}));
            }),
            "[index_select] idx must have 1 dimensions, got 2 (shape [1, 2])");
  EXPECT_EQ(invalid_argument_message([&] {
              index_select_backward(Tensor::zeros({2, 3}), {2, 4}, 1, i64({0, 1}, {2}));
            }),
            "[index_select_backward] dy must have shape [2, 2], got [2, 3]");
}

// ---- gather -------------------------------------------------------------------------------------

TEST(Gather, FollowsTorchSemantics) {
  const Tensor x = f32({1, 2, 3, 4}, {2, 2});
  // torch.gather(x, 1, [[0, 0], [1, 0]]) = [[1, 1], [4, 3]]; along dim 0 rows are picked.
  EXPECT_TRUE(all_close(gather(x, 1, i64({0, 0, 1, 0}, {2, 2})), f32({1, 1, 4, 3}, {2, 2}), 0));
  EXPECT_TRUE(all_close(gather(x, 0, i64({1, 0, 0, 0}, {2, 2})), f32({3, 2, 1, 2}, {2, 2}), 0));
  // idx may be smaller than x outside dim, and x strided: x.t() = [[1, 3], [2, 4]].
  EXPECT_TRUE(all_close(gather(x.t(), 1, i64({1, 1, 0}, {1, 3})), f32({3, 3, 1}, {1, 3}), 0));
  // Gathers move elements of any dtype.
  const Tensor ints = gather(i64({5, 6, 7}, {3}), 0, i64({2, 0}, {2}));
  EXPECT_EQ(ints.to_vector<int64_t>(), (std::vector<int64_t>{7, 5}));
}

TEST(Gather, MatchesLoopsOn3D) {
  const Tensor x = testing::rand_normal({3, 5, 4}, 2);
  const Tensor idx = randint({2, 6, 3}, 0, 5);  // dim 1; smaller than x in dims 0 and 2
  const std::vector<double> v = x.to_vector<double>();
  const std::vector<int64_t> ids = idx.to_vector<int64_t>();
  std::vector<double> expected;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 6; ++j)
      for (int64_t k = 0; k < 3; ++k)
        expected.push_back(v[(i * 5 + ids[(i * 6 + j) * 3 + k]) * 4 + k]);
  EXPECT_TRUE(
      all_close(gather(x, 1, idx), Tensor::from_vector(expected, {2, 6, 3}, DType::f32), 0));
  EXPECT_TRUE(all_close(gather(testing::non_contiguous(x), -2, idx), gather(x, 1, idx), 0));
}

TEST(Gather, BackwardScatterAddsRepeatedIndices) {
  // x [2, 3], dim 1: row 0 takes columns [2, 2], row 1 takes [0, 1].
  const Tensor dy = f32({1, 2, 3, 4}, {2, 2});
  const Tensor idx = i64({2, 2, 0, 1}, {2, 2});
  for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
    const Tensor dx = gather_backward(dy.to(dtype), {2, 3}, 1, idx);
    EXPECT_EQ(dx.dtype(), dtype);
    EXPECT_TRUE(all_close(dx, f32({0, 0, 3, 3, 4, 0}, {2, 3}), 0));
  }
}

TEST(Gather, RejectsBadInputs) {
  const Tensor x = Tensor::zeros({2, 3});
  EXPECT_EQ(invalid_argument_message([&] {
              gather(x, 1, i64({0, 3}, {1, 2}));
            }),
            "[gather] index 3 out of range [0, 3) at position 1");
  EXPECT_EQ(invalid_argument_message([&] {
              gather(x, 1, i64({0, 1}, {2}));
            }),
            "[gather] idx [2] must have as many dimensions as x [2, 3]");
  EXPECT_EQ(invalid_argument_message([&] {
              gather(x, 1, i64({0, 0, 0}, {3, 1}));
            }),
            "[gather] idx [3, 1] is larger than x [2, 3] in dim 0");
  EXPECT_EQ(invalid_argument_message([&] {
              gather(x, 1, f32({0}, {1, 1}));
            }),
            "[gather] idx must be i32 or i64, got f32");
  EXPECT_EQ(invalid_argument_message([&] {
              gather_backward(Tensor::zeros({1, 2}), {2, 3}, 1, i64({0}, {1, 1}));
            }),
            "[gather_backward] dy must have shape [1, 1], got [1, 2]");
}

}  // namespace
}  // namespace sprig
