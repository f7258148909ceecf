// Tensor core on CPU: creation, views sharing storage (view, reshape, transpose, permute, slice,
// narrow, select, expand, unsqueeze/squeeze, as_strided), copies only when needed, dtype round
// trips, copy_ with broadcasting, fill_, host transfers, printing, and the errors of bad views.
#include "tensor/tensor.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tensor/cuda/kernels.h"
#include "tensor/storage.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using Values = std::vector<double>;

Values vals(const Tensor& t) { return t.to_vector<double>(); }

// 0, 1, ..., n-1 as an f32 tensor of `shape`.
Tensor iota(const Shape& shape) {
  return Tensor::arange(shape_numel(shape), DType::f32).view(shape);
}

// ---- creation and metadata ----------------------------------------------------------------------

TEST(Tensor, CreationValuesAndMetadata) {
  const Tensor z = Tensor::zeros({2, 3}, DType::i32);
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.strides(), (Shape{3, 1}));
  EXPECT_EQ(z.dtype(), DType::i32);
  EXPECT_EQ(z.numel(), 6);
  EXPECT_EQ(z.nbytes(), 24u);
  EXPECT_EQ(z.size(-1), 3);
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(vals(z), Values(6, 0.0));
  EXPECT_EQ(vals(Tensor::ones({3}, DType::bf16)), Values(3, 1.0));
  EXPECT_EQ(vals(Tensor::full({2}, -2.5, DType::f64)), (Values{-2.5, -2.5}));
  EXPECT_EQ(Tensor::arange(4).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(Tensor::arange(4).dtype(), DType::i64);
  const Tensor s = Tensor::scalar(2.5);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.item(), 2.5);
  EXPECT_EQ(z.describe(), "Tensor[2, 3] i32 cpu");
  EXPECT_FALSE(Tensor().defined());
  EXPECT_EQ(Tensor().describe(), "Tensor(undefined)");
}

TEST(Tensor, RefusesImpossibleSizesWithASentence) {
  try {
    Tensor::empty({int64_t{1} << 40, int64_t{1} << 40}, DType::f32);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "[empty] a f32 tensor of shape [1099511627776, "
              "1099511627776] needs more bytes than memory can address");
  }
  const size_t available = cpu_memory_available();
  const int64_t too_many = static_cast<int64_t>(available / 4 + (size_t{1} << 28));
  try {
    Tensor::empty({too_many}, DType::f32);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[memory] a " + std::to_string(too_many * 4 >> 20) +
                            " MiB CPU allocation does not fit the ",
                        0),
              0u)
        << msg;
    EXPECT_NE(msg.find(" MiB of memory available"), std::string::npos) << msg;
  }
}

TEST(Tensor, HostTransfers) {
  const Tensor t = Tensor::from_vector(std::vector<float>{1.5f, -2.f, 3.f, 4.f}, {2, 2});
  EXPECT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -2.f, 3.f, 4.f}));
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, 3, 4}));  // truncation
  const Tensor h = Tensor::from_vector(std::vector<int64_t>{7, 8}, {2}, DType::f16);
  EXPECT_EQ(h.dtype(), DType::f16);
  EXPECT_EQ(vals(h), (Values{7, 8}));
  EXPECT_EQ(t.select(0, 1).select(0, 0).item(), 3.0);
  EXPECT_EQ(testing::invalid_argument_message([] {
              Tensor::from_vector(std::vector<float>{1, 2, 3}, {2, 2});
            }),
            "[from_vector] 3 values do not fill shape [2, 2]");
  EXPECT_EQ(testing::invalid_argument_message([&] { t.item(); }),
            "[item] expected one element, got shape [2, 2]");
  EXPECT_EQ(testing::invalid_argument_message([&] { t.data<int64_t>(); }),
            "[data] tensor has dtype f32, requested i64");
  EXPECT_EQ(testing::invalid_argument_message([] {
              Tensor::empty({2, -1});
            }),
            "[empty] negative size in shape [2, -1]");
  const Device absent = Device::cuda(cuda::device_count());  // one past the last device
  EXPECT_EQ(testing::invalid_argument_message([&] { Tensor::empty({2}, DType::f32, absent); }),
            "[empty] device " + absent.str() + " is not available (" +
                std::to_string(cuda::device_count()) + " CUDA devices)");
}

// ---- views -------------------------------------------------------------------------------------

TEST(TensorViews, ViewSharesStorageAndInfersOneDim) {
  const Tensor a = iota({3, 4});
  const Tensor v = a.view({2, -1});
  EXPECT_EQ(v.shape(), (Shape{2, 6}));
  EXPECT_TRUE(v.shares_storage(a));
  EXPECT_EQ(vals(v), vals(a));
  v.select(0, 1).select(0, 0).fill_(-1.0);  // element 6 of the shared storage
  EXPECT_EQ(vals(a)[6], -1.0);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              a.view({5, -1});
            }),
            "[view] shape [5, -1] is invalid for 12 elements");
  EXPECT_EQ(testing::invalid_argument_message([&] {
              a.view({-1, -1});
            }),
            "[view] only one -1 allowed");
  EXPECT_EQ(testing::invalid_argument_message([&] { a.t().view({12}); }),
            "[view] cannot view Tensor[4, 3] f32 cpu as [12] without a copy; use reshape");
}

TEST(TensorViews, ReshapeViewsWhenPossibleAndCopiesOtherwise) {
  const Tensor a = iota({2, 3, 4});
  const Tensor merged = a.slice(0, 1, 2).reshape({3, 4});  // a contiguous sub-block
  EXPECT_TRUE(merged.shares_storage(a));
  EXPECT_EQ(vals(merged), vals(a.select(0, 1)));
  const Tensor split_inner = a.transpose(0, 1).reshape({3, 2, 2, 2});  // splits a contiguous dim
  EXPECT_TRUE(split_inner.shares_storage(a));
  const Tensor t = a.transpose(1, 2);  // [2, 4, 3], not viewable as [2, 12]
  const Tensor copied = t.reshape({2, 12});
  EXPECT_FALSE(copied.shares_storage(a));
  EXPECT_TRUE(copied.is_contiguous());
  // Row-major order of the transpose: (b, k, j) -> a[b][j][k] = 12b + 4j + k.
  Values expected;
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j) expected.push_back(12 * b + 4 * j + k);
  EXPECT_EQ(vals(copied), expected);
  EXPECT_EQ(vals(a.flatten()), vals(a));
  EXPECT_EQ(a.flatten().shape(), (Shape{24}));
}

TEST(TensorViews, TransposeAndContiguous) {
  const Tensor a = iota({2, 3});
  const Tensor t = a.t();
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 3}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_TRUE(t.shares_storage(a));
  EXPECT_EQ(vals(t), (Values{0, 3, 1, 4, 2, 5}));
  const Tensor c = t.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_FALSE(c.shares_storage(a));
  EXPECT_EQ(vals(c), (Values{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(a.contiguous().data_ptr(), a.data_ptr());  // no copy when already contiguous
  EXPECT_EQ(testing::invalid_argument_message([&] { a.transpose(0, 2); }),
            "[transpose] dim 2 is out of range for a tensor with 2 dimensions");
}

TEST(TensorViews, Permute) {
  const Tensor a = iota({2, 3, 4});
  const Tensor p = a.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_TRUE(p.shares_storage(a));
  const Values v = vals(p);
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_EQ(v[k * 6 + i * 3 + j], 12 * i + 4 * j + k);
  EXPECT_EQ(vals(a.permute({-1, 0, 1})), v);
  EXPECT_EQ(testing::invalid_argument_message([&] {
              a.permute({0, 0, 1});
            }),
            "[permute] dim 0 repeated");
  EXPECT_EQ(testing::invalid_argument_message([&] {
              a.permute({0, 1});
            }),
            "[permute] got 2 dims for a tensor with 3");
}

TEST(TensorViews, SliceWithStepAndNegativeBounds) {
  const Tensor a = iota({10});
  const Tensor s = a.slice(0, 1, 8, 3);
  EXPECT_EQ(vals(s), (Values{1, 4, 7}));
  EXPECT_EQ(s.strides(), (Shape{3}));
  EXPECT_EQ(s.offset(), 1);
  EXPECT_TRUE(s.shares_storage(a));
  EXPECT_EQ(vals(a.slice(0, -3, -1)), (Values{7, 8}));
  EXPECT_EQ(vals(a.slice(0, 8, 100)), (Values{8, 9}));  // end clamps to the size
  EXPECT_EQ(a.slice(0, 6, 2).numel(), 0);               // empty, not an error
  const Tensor m = iota({3, 5});
  EXPECT_EQ(vals(m.slice(1, 0, 5, 2)), (Values{0, 2, 4, 5, 7, 9, 10, 12, 14}));
  EXPECT_EQ(vals(m.slice(0, 1, 3).slice(1, 1, 5, 3)), (Values{6, 9, 11, 14}));
  EXPECT_EQ(testing::invalid_argument_message([&] { a.slice(0, 0, 4, 0); }),
            "[slice] step must be positive, got 0");
}

TEST(TensorViews, NarrowAndSelect) {
  const Tensor a = iota({3, 4});
  EXPECT_EQ(vals(a.narrow(1, 1, 2)), (Values{1, 2, 5, 6, 9, 10}));
  EXPECT_EQ(vals(a.narrow(0, 2, 1)), (Values{8, 9, 10, 11}));
  const Tensor row = a.select(0, 1);
  EXPECT_EQ(row.shape(), (Shape{4}));
  EXPECT_EQ(vals(row), (Values{4, 5, 6, 7}));
  const Tensor col = a.select(1, -1);
  EXPECT_EQ(vals(col), (Values{3, 7, 11}));
  EXPECT_EQ(col.strides(), (Shape{4}));
  EXPECT_TRUE(col.shares_storage(a));
  EXPECT_EQ(testing::invalid_argument_message([&] { a.narrow(1, 3, 2); }),
            "[narrow] range [3, 5) is out of bounds for size 4 of dim 1");
  EXPECT_EQ(testing::invalid_argument_message([&] { a.select(0, 3); }),
            "[select] index 3 is out of bounds for size 3");
}

TEST(TensorViews, ExpandUsesStrideZero) {
  const Tensor col = iota({3, 1});
  const Tensor e = col.expand({2, 3, 4});
  EXPECT_EQ(e.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_TRUE(e.shares_storage(col));
  Values expected;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) expected.push_back(i);
  EXPECT_EQ(vals(e), expected);
  const Tensor c = e.contiguous();  // materialises the broadcast
  EXPECT_EQ(c.strides(), (Shape{12, 4, 1}));
  EXPECT_EQ(vals(c), expected);
  EXPECT_EQ(col.expand({-1, 5}).shape(), (Shape{3, 5}));
  EXPECT_EQ(testing::invalid_argument_message([&] {
              iota({3, 2}).expand({3, 4});
            }),
            "[expand] cannot expand [3, 2] to [3, 4]");
  EXPECT_EQ(testing::invalid_argument_message([&] { col.expand({1}); }),
            "[expand] cannot expand [3, 1] to [1]");
  EXPECT_EQ(testing::invalid_argument_message([&] {
              col.expand({-1, 3, 1});
            }),
            "[expand] -1 not allowed for new dims");
}

TEST(TensorViews, UnsqueezeSqueezeAndAsStrided) {
  const Tensor a = iota({2, 3});
  EXPECT_EQ(a.unsqueeze(0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(a.unsqueeze(1).shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(a.unsqueeze(-1).shape(), (Shape{2, 3, 1}));
  EXPECT_TRUE(a.unsqueeze(1).is_contiguous());
  EXPECT_EQ(vals(a.unsqueeze(2)), vals(a));
  EXPECT_EQ(a.unsqueeze(1).squeeze(1).shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(a.t().unsqueeze(0).squeeze(0)), vals(a.t()));
  EXPECT_EQ(testing::invalid_argument_message([&] { a.squeeze(1); }),
            "[squeeze] dim 1 has size 3, not 1");
  EXPECT_EQ(testing::invalid_argument_message([&] { a.unsqueeze(3); }),
            "[unsqueeze] dim 3 is out of range for a tensor with 3 dimensions");
  // Overlapping sliding windows of width 3 over 0..5.
  const Tensor w = iota({6}).as_strided({4, 3}, {1, 1}, 0);
  EXPECT_EQ(vals(w), (Values{0, 1, 2, 1, 2, 3, 2, 3, 4, 3, 4, 5}));
}

// ---- copies ------------------------------------------------------------------------------------

TEST(TensorCopies, CloneIsIndependent) {
  const Tensor a = iota({2, 2});
  const Tensor c = a.clone();
  EXPECT_FALSE(c.shares_storage(a));
  c.fill_(9.0);
  EXPECT_EQ(vals(a), (Values{0, 1, 2, 3}));
  EXPECT_EQ(vals(c), Values(4, 9.0));
  const Tensor ct = a.t().clone();  // a clone of a view is contiguous in the view's order
  EXPECT_TRUE(ct.is_contiguous());
  EXPECT_EQ(vals(ct), (Values{0, 2, 1, 3}));
}

TEST(TensorCopies, DTypeRoundTripsForAllDTypes) {
  const Values v = {0, 1, -2, 3, 100, -7, 64, 5};
  const Tensor src = Tensor::from_vector(v, {2, 4}, DType::f64);
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64}) {
    const Tensor c = src.to(t);
    EXPECT_EQ(c.dtype(), t);
    EXPECT_EQ(c.shape(), (Shape{2, 4}));
    EXPECT_EQ(vals(c.to(DType::f64)), v) << dtype_name(t);
    EXPECT_EQ(vals(src.t().to(t)), vals(src.t())) << dtype_name(t);  // strided source
  }
  const Tensor b = src.to(DType::boolean);  // nonzero -> true
  EXPECT_EQ(b.to_vector<bool>(),
            (std::vector<bool>{false, true, true, true, true, true, true, true}));
  EXPECT_EQ(vals(b.to(DType::f32)), (Values{0, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(src.to(DType::f64).data_ptr(), src.data_ptr());  // same dtype: no copy
  // Floats to ints truncate toward zero; f32 to bf16 rounds to nearest even.
  const Tensor f = Tensor::from_vector(std::vector<float>{2.7f, -2.7f, 1.00390625f}, {3});
  EXPECT_EQ(f.to(DType::i64).to_vector<int64_t>(), (std::vector<int64_t>{2, -2, 1}));
  EXPECT_EQ(vals(f.to(DType::bf16)), (Values{2.703125, -2.703125, 1.0}));
}

TEST(TensorCopies, CopyBroadcastsAndConverts) {
  const Tensor dst = Tensor::zeros({2, 3});
  dst.copy_(Tensor::from_vector(std::vector<int64_t>{1, 2, 3}, {3}));  // a row, from i64
  EXPECT_EQ(vals(dst), (Values{1, 2, 3, 1, 2, 3}));
  dst.copy_(Tensor::from_vector(std::vector<double>{-1, 5}, {2, 1}));  // a column
  EXPECT_EQ(vals(dst), (Values{-1, -1, -1, 5, 5, 5}));
  dst.t().copy_(iota({3, 2}));  // into a non-contiguous destination
  EXPECT_EQ(vals(dst), (Values{0, 2, 4, 1, 3, 5}));
  dst.narrow(1, 1, 2).copy_(Tensor::scalar(7.0));
  EXPECT_EQ(vals(dst), (Values{0, 7, 7, 1, 7, 7}));
  EXPECT_EQ(testing::invalid_argument_message([&] { dst.copy_(iota({4})); }),
            "[expand] cannot expand [4] to [2, 3]");
  EXPECT_EQ(testing::invalid_argument_message([&] { dst.copy_(Tensor()); }),
            "[copy_] undefined tensor");
}

// Strided copies run row by row over merged dimensions: every layout below must land each element
// where the element-by-element definition puts it, in the same dtype and across dtypes.
TEST(TensorCopies, StridedCopiesOfEveryLayoutMatchTheElementwiseDefinition) {
  const Tensor base = Tensor::arange(2 * 3 * 4 * 5, DType::f32).reshape({2, 3, 4, 5});
  const std::vector<std::pair<const char*, Tensor>> views = {
      {"narrow of a middle dim", base.narrow(2, 1, 2)},
      {"narrow of the last dim", base.narrow(3, 1, 3)},
      {"transpose", base.transpose(1, 3)},
      {"slice with step", base.slice(3, 0, 5, 2)},
      {"expand", base.narrow(1, 0, 1).expand({2, 4, 4, 5})},
      {"select then transpose", base.select(0, 1).transpose(0, 1)}};
  for (const auto& [name, view] : views) {
    // The definition: element i of the view is at strided offset i of its storage.
    const std::vector<float> all = base.to_vector<float>();
    std::vector<float> want(static_cast<size_t>(view.numel()));
    const float* origin = base.data<float>();
    for (int64_t i = 0; i < view.numel(); ++i) {
      int64_t offset = view.data<float>() - origin, rest = i;
      for (int64_t d = view.dim() - 1; d >= 0; --d) {
        offset += (rest % view.size(d)) * view.strides()[d];
        rest /= view.size(d);
      }
      want[static_cast<size_t>(i)] = all[static_cast<size_t>(offset)];
    }
    EXPECT_EQ(view.contiguous().to_vector<float>(), want) << name;
    EXPECT_EQ(view.to(DType::f64).to_vector<float>(), want) << name;
    // Into a strided destination: the transposed storage of a fresh tensor.
    Tensor dst = Tensor::zeros(view.shape())
                     .transpose(0, view.dim() - 1)
                     .contiguous()
                     .transpose(0, view.dim() - 1);
    dst.copy_(view);
    EXPECT_EQ(dst.to_vector<float>(), want) << name << " into a transposed destination";
  }
}

TEST(TensorCopies, FillTouchesOnlyTheView) {
  const Tensor a = Tensor::zeros({3, 4});
  a.select(1, 2).fill_(4.5);  // one column: non-contiguous
  a.slice(0, 0, 3, 2).narrow(1, 0, 1).fill_(-1.0);
  EXPECT_EQ(vals(a), (Values{-1, 0, 4.5, 0, 0, 0, 4.5, 0, -1, 0, 4.5, 0}));
  const Tensor i = Tensor::empty({3}, DType::i32);
  i.fill_(3.9);
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{3, 3, 3}));
  const Tensor b = Tensor::ones({2}, DType::boolean);
  b.zero_();
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{false, false}));
  const Tensor h = Tensor::empty({2}, DType::f16);
  h.fill_(0.1);
  EXPECT_EQ(h.to_vector<f16>()[0].bits, f16(0.1f).bits);
}

// ---- printing ----------------------------------------------------------------------------------

TEST(TensorPrinting, ShapeAndValues) {
  const Tensor a = iota({2, 3});
  EXPECT_EQ(a.str(), "Tensor[2, 3] f32 cpu\n[[0, 1, 2], [3, 4, 5]]");
  std::ostringstream os;
  os << a.t();
  EXPECT_EQ(os.str(), "Tensor[3, 2] f32 cpu\n[[0, 3], [1, 4], [2, 5]]");
  EXPECT_EQ(Tensor::scalar(-2.5, DType::f64).str(), "Tensor[] f64 cpu\n-2.5");
  EXPECT_EQ(Tensor().str(), "Tensor(undefined)");
}

TEST(TensorPrinting, LongDimsAreElided) {
  EXPECT_EQ(iota({20}).str(), "Tensor[20] f32 cpu\n[0, 1, 2, ..., 17, 18, 19]");
  EXPECT_EQ(iota({10}).str(4), "Tensor[10] f32 cpu\n[0, 1, ..., 8, 9]");
  EXPECT_EQ(iota({6}).str(), "Tensor[6] f32 cpu\n[0, 1, 2, 3, 4, 5]");  // at the limit: all
  const std::string s = iota({8, 2}).str(2);
  EXPECT_EQ(s, "Tensor[8, 2] f32 cpu\n[[0, 1], ..., [14, 15]]");
}

}  // namespace
}  // namespace sprig
