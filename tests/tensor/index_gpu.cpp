// CUDA parity of the indexing ops: every op and backward against its CPU twin, in f32, bf16 and
// f16, on awkward sizes (1, 17, 31, 33, 97, 1025), i32 and i64 ids, repeated ids, strided and
// misaligned inputs (which change the gather's copy unit).
#include <gtest/gtest.h>

#include "tensor/ops.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;

const Device kCuda = Device::cuda();
const DType kFloatTypes[] = {DType::f32, DType::bf16, DType::f16};

// Gradient rows receive a sum of a few scattered rows (added atomically, in another order than
// on the CPU), rounded once to the dtype.
constexpr int64_t kScatteredRows = 8;

// A contiguous copy of x that starts one element into a larger buffer (misaligned for wide copies).
Tensor offset_copy(const Tensor& x) {
  Tensor buffer = Tensor::zeros({x.numel() + 1}, x.dtype(), x.device());
  Tensor view = buffer.narrow(0, 1, x.numel()).view(x.shape());
  view.copy_(x);
  return view;
}

TEST(IndexGpu, EmbeddingAndBackward) {
  SPRIG_REQUIRE_CUDA();
  struct Case {
    int64_t v, h;
    Shape ids;
  };
  uint64_t seed = 100;
  for (const Case& c : {Case{1, 33, {5}}, Case{17, 31, {97}}, Case{97, 1025, {3, 33}},
                        Case{33, 64, {17, 2}}, Case{1025, 1, {31}}})
    for (DType dtype : kFloatTypes)
      for (DType id_type : {DType::i64, DType::i32}) {
        const Tensor w = testing::rand_normal({c.v, c.h}, ++seed, dtype);
        const Tensor ids = randint(c.ids, 0, c.v, id_type);  // sizes > v repeat ids
        const Tensor out = embedding(w, ids);
        EXPECT_TRUE(all_close(embedding(w.to(kCuda), ids.to(kCuda)), out, 0));
        EXPECT_TRUE(all_close(embedding(offset_copy(w.to(kCuda)), ids.to(kCuda)), out, 0));
        EXPECT_TRUE(
            all_close(embedding(testing::non_contiguous(w.to(kCuda)), ids.to(kCuda)), out, 0));

        Shape dy_shape = c.ids;
        dy_shape.push_back(c.h);
        const Tensor dy = testing::rand_normal(dy_shape, ++seed, dtype);
        const Tensor dw = testing::rand_normal({c.v, c.h}, ++seed, dtype);
        const Tensor dw_gpu = dw.to(kCuda);
        embedding_backward(dy, ids, dw);
        embedding_backward(dy.to(kCuda), ids.to(kCuda), dw_gpu);
        EXPECT_PARITY(dw_gpu, dw, kScatteredRows)
            << "v " << c.v << " h " << c.h << " " << dtype_name(dtype);
      }
}

TEST(IndexGpu, IndexSelectAndBackward) {
  SPRIG_REQUIRE_CUDA();
  uint64_t seed = 200;
  for (DType dtype : kFloatTypes)
    for (int64_t dim = 0; dim < 3; ++dim) {
      const Tensor x = testing::rand_normal({17, 33, 31}, ++seed, dtype);
      const Tensor idx = randint({97}, 0, x.size(dim));
      const Tensor out = index_select(x, dim, idx);
      EXPECT_TRUE(all_close(index_select(x.to(kCuda), dim, idx.to(kCuda)), out, 0));
      EXPECT_TRUE(all_close(index_select(testing::non_contiguous(x.to(kCuda)), dim, idx.to(kCuda)),
                            out, 0));
      const Tensor dy = testing::rand_normal(out.shape(), ++seed, dtype);
      const Tensor dx = index_select_backward(dy, x.shape(), dim, idx);
      EXPECT_PARITY(index_select_backward(dy.to(kCuda), x.shape(), dim, idx.to(kCuda)), dx,
                    kScatteredRows)
          << "dim " << dim << " " << dtype_name(dtype);
    }
}

TEST(IndexGpu, GatherAndBackward) {
  SPRIG_REQUIRE_CUDA();
  uint64_t seed = 300;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (int64_t dim = 0; dim < 3; ++dim) {
      const Tensor x = testing::rand_normal({17, 33, 31}, ++seed, dtype);
      Shape idx_shape = {17, 31, 1};  // smaller than x outside dim
      idx_shape[dim] = 97;
      const Tensor idx = randint(idx_shape, 0, x.size(dim), DType::i32);
      const Tensor out = gather(x, dim, idx);
      EXPECT_TRUE(all_close(gather(x.to(kCuda), dim, idx.to(kCuda)), out, 0));
      EXPECT_TRUE(
          all_close(gather(testing::non_contiguous(x.to(kCuda)), dim, idx.to(kCuda)), out, 0));
      const Tensor dy = testing::rand_normal(idx_shape, ++seed, dtype);
      const Tensor dx = gather_backward(dy, x.shape(), dim, idx);
      EXPECT_PARITY(gather_backward(dy.to(kCuda), x.shape(), dim, idx.to(kCuda)), dx,
                    kScatteredRows)
          << "dim " << dim << " " << dtype_name(dtype);
    }
}

TEST(IndexGpu, ConcatSplitAndIdChecks) {
  SPRIG_REQUIRE_CUDA();
  const Tensor a = testing::rand_normal({17, 31}, 400), b = testing::rand_normal({17, 1}, 401);
  const Tensor joined = concat({a.to(kCuda), testing::non_contiguous(b.to(kCuda))}, 1);
  EXPECT_EQ(joined.device(), kCuda);
  EXPECT_TRUE(all_close(joined, concat({a, b}, 1), 0));
  const std::vector<Tensor> parts = split(joined, {31, 1}, 1);
  EXPECT_TRUE(all_close(parts[1], b, 0));
  // Ids on the device are range-checked on the host, with the same message as on the CPU.
  const Tensor w = Tensor::zeros({64, 2}, DType::f32, kCuda);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              embedding(w, Tensor::from_vector<int64_t>({1, 2, 3, 70}, {4}, kCuda));
            }),
            "[embedding] id 70 out of range [0, 64) at position 3");
  EXPECT_EQ(testing::invalid_argument_message(
                [&] { embedding(w, Tensor::from_vector<int64_t>({1}, {1})); }),
            "[embedding] tensors are on different devices: cuda:0 and cpu");
}

}  // namespace
}  // namespace sprig
