// The parity table of rope and its inverse (the backward): f32 and bf16, head dims 64 and 128,
// i64 positions with YaRN's attention scaling and i32 without, a strided input on the GPU.
#pragma once

#include <string>

#include "tensor/cuda/kernels.h"
#include "tensor/ops.h"
#include "tests/parity/parity.h"

namespace sprig::parity {

inline std::vector<Case> rope_cases() {
  std::vector<Case> cases;
  uint64_t seed = 200;
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t D : {64, 128})
      for (DType pos_dt : {DType::i64, DType::i32}) {
        RopeFrequencies f = rope_frequencies(D, 1e6);
        if (pos_dt == DType::i64) f.attention_scaling = 1.2079441f;
        const Shape shape = {2, 17, 3, D};
        const auto inputs = [=](Backend b) {
          return std::pair{on(b, testing::rand_normal(shape, seed + 1, dt)),
                           on(b, testing::rand_uniform({2, 17}, 0, 32768, seed + 2).to(pos_dt))};
        };
        const std::string name = case_name("rope", dt, shape) + " positions " + dtype_name(pos_dt);
        // x1 cos - x2 sin: two terms of size up to |x| ~ 2 that can cancel.
        cases.push_back({name, kEveryDevice, [=](Backend b) {
                           const auto [x, pos] = inputs(b);
                           Tensor y, dx;
                           if (b == kEmu) {
                             y = nan_like(x), dx = nan_like(x);
                             cuda::rope(x, pos, y, f, false, nullptr);
                             cuda::rope(x, pos, dx, f, true, nullptr);
                           } else {
                             y = rope(x, pos, f), dx = rope_backward(x, pos, f);
                           }
                           return std::vector<Output>{{"y", y, 2, 2.0}, {"dx", dx, 2, 2.0}};
                         }});
        cases.push_back(
            {name + " strided", kCuda, [=](Backend b) {
               const auto [x, pos] = inputs(b);
               return std::vector<Output>{{"y", rope(testing::non_contiguous(x), pos, f), 2, 2.0}};
             }});
        seed += 2;
      }
  return cases;
}

}  // namespace sprig::parity
