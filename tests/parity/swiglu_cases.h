// The parity table of swiglu and its backward: f32 and bf16 on awkward shapes (the 16-byte vector
// path: 97 x 1024, a multiple of 8 elements; the scalar one: the others), strided inputs on the
// GPU.
#pragma once

#include "tensor/cuda/kernels.h"
#include "tensor/ops.h"
#include "tests/parity/parity.h"

namespace sprig::parity {

inline std::vector<Case> swiglu_cases() {
  using testing::rand_normal;
  std::vector<Case> cases;
  uint64_t seed = 300;
  for (DType dt : {DType::f32, DType::bf16})
    for (const Shape& shape : {Shape{1}, Shape{17, 33}, Shape{97, 1024}, Shape{1025, 31}}) {
      cases.push_back({case_name("swiglu", dt, shape), kEveryDevice, [=](Backend b) {
                         const Tensor gate = on(b, rand_normal(shape, seed + 1, dt)),
                                      up = on(b, rand_normal(shape, seed + 2, dt)),
                                      dout = on(b, rand_normal(shape, seed + 3, dt));
                         Tensor out, dgate, dup;
                         if (b == kEmu) {
                           out = nan_like(gate), dgate = nan_like(gate), dup = nan_like(gate);
                           cuda::swiglu(gate, up, out, nullptr);
                           cuda::swiglu_backward(gate, up, dout, dgate, dup, nullptr);
                         } else {
                           out = swiglu(gate, up);
                           std::tie(dgate, dup) = swiglu_backward(gate, up, dout);
                         }
                         return std::vector<Output>{{"out", out}, {"dgate", dgate}, {"dup", dup}};
                       }});
      seed += 3;
    }
  cases.push_back({"swiglu f32 [33, 8] strided", kCuda, [](Backend b) {
                     const Tensor gate = rand_normal({33, 8}, 350), up = rand_normal({33, 8}, 351);
                     return std::vector<Output>{
                         {"out", swiglu(testing::non_contiguous(on(b, gate)),
                                        testing::non_contiguous(on(b, up)))}};
                   }});
  return cases;
}

}  // namespace sprig::parity
