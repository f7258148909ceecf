// The parity tables of the indexing ops (GPU only), in f32, bf16 and f16 (and f64 for gather):
// embedding, index_select and gather with their backward, on awkward sizes, i32 and i64 ids,
// repeated ids, strided and misaligned inputs (which change the gather's copy unit). The forward
// copies values, so it is exact; a gradient row receives a sum of a few scattered rows (added
// atomically, in another order than on the CPU), rounded once to the dtype.
#pragma once

#include <string>
#include <vector>

#include "tensor/ops.h"
#include "tests/parity/parity.h"

namespace sprig::parity {

inline constexpr int64_t kScatteredRows = 8;

// A contiguous copy of x that starts one element into a larger buffer (misaligned for wide copies).
inline Tensor offset_copy(const Tensor& x) {
  Tensor buffer = Tensor::zeros({x.numel() + 1}, x.dtype(), x.device());
  Tensor view = buffer.narrow(0, 1, x.numel()).view(x.shape());
  view.copy_(x);
  return view;
}

// `x` as it is, misaligned and strided: the forward of each, exact.
inline std::vector<Output> exact_layouts(const std::function<Tensor(const Tensor&)>& op,
                                         const Tensor& x) {
  return {{"out", op(x), 1, 1.0, true},
          {"out misaligned", op(offset_copy(x)), 1, 1.0, true},
          {"out strided", op(testing::non_contiguous(x)), 1, 1.0, true}};
}

inline std::vector<Case> embedding_cases() {
  struct Dims {
    int64_t v, h;
    Shape ids;
  };
  std::vector<Case> cases;
  uint64_t seed = 100;
  for (const Dims& d : {Dims{1, 33, {5}}, Dims{17, 31, {97}}, Dims{97, 1025, {3, 33}},
                        Dims{33, 64, {17, 2}}, Dims{1025, 1, {31}}})
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (DType id_type : {DType::i64, DType::i32}) {
        const std::string name = case_name("embedding", dt, {d.v, d.h}) + " ids " +
                                 shape_str(d.ids) + " " + dtype_name(id_type);
        // Ids drawn once for every device (sizes > v repeat ids).
        const Tensor ids_host = randint(d.ids, 0, d.v, id_type);
        cases.push_back({name, kCuda, [=](Backend b) {
                           const Tensor w = on(b, testing::rand_normal({d.v, d.h}, seed + 1, dt));
                           const Tensor ids = on(b, ids_host);
                           Shape dy_shape = d.ids;
                           dy_shape.push_back(d.h);
                           const Tensor dy = on(b, testing::rand_normal(dy_shape, seed + 2, dt));
                           const Tensor dw = on(b, testing::rand_normal({d.v, d.h}, seed + 3, dt));
                           embedding_backward(dy, ids, dw);  // adds into dw
                           std::vector<Output> out =
                               exact_layouts([&](const Tensor& x) { return embedding(x, ids); }, w);
                           out.push_back({"dw", dw, kScatteredRows});
                           return out;
                         }});
        seed += 3;
      }
  return cases;
}

inline std::vector<Case> index_select_cases() {
  std::vector<Case> cases;
  uint64_t seed = 200;
  const Shape shape = {17, 33, 31};
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t dim = 0; dim < 3; ++dim) {
      const Tensor idx_host = randint({97}, 0, shape[static_cast<size_t>(dim)]);
      cases.push_back(
          {case_name("index_select", dt, shape) + " dim " + std::to_string(dim), kCuda,
           [=](Backend b) {
             const Tensor x = on(b, testing::rand_normal(shape, seed + 1, dt));
             const Tensor idx = on(b, idx_host);
             const auto op = [&](const Tensor& t) { return index_select(t, dim, idx); };
             const Tensor dy = on(b, testing::rand_normal(op(x).shape(), seed + 2, dt));
             std::vector<Output> out = exact_layouts(op, x);
             out.push_back({"dx", index_select_backward(dy, shape, dim, idx), kScatteredRows});
             return out;
           }});
      seed += 2;
    }
  return cases;
}

inline std::vector<Case> gather_cases() {
  std::vector<Case> cases;
  uint64_t seed = 300;
  const Shape shape = {17, 33, 31};
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (int64_t dim = 0; dim < 3; ++dim) {
      Shape idx_shape = {17, 31, 1};  // smaller than x outside dim
      idx_shape[static_cast<size_t>(dim)] = 97;
      const Tensor idx_host = randint(idx_shape, 0, shape[static_cast<size_t>(dim)], DType::i32);
      cases.push_back(
          {case_name("gather", dt, shape) + " dim " + std::to_string(dim), kCuda, [=](Backend b) {
             const Tensor x = on(b, testing::rand_normal(shape, seed + 1, dt));
             const Tensor idx = on(b, idx_host);
             const Tensor dy = on(b, testing::rand_normal(idx_shape, seed + 2, dt));
             std::vector<Output> out =
                 exact_layouts([&](const Tensor& t) { return gather(t, dim, idx); }, x);
             out.push_back({"dx", gather_backward(dy, shape, dim, idx), kScatteredRows});
             return out;
           }});
      seed += 2;
    }
  return cases;
}

}  // namespace sprig::parity
