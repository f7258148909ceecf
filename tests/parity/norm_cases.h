// The parity table of rms_norm and its backward: f32 and bf16, rows through the scalar and
// 16-byte vector paths (H 31, 33, 1024), dw accumulated (from 1) into f32 and into the input's
// dtype; the largest row counts on the GPU alone, a strided input with leading dims on the GPU.
#pragma once

#include <string>
#include <vector>

#include "tensor/cuda/kernels.h"
#include "tensor/ops.h"
#include "tests/parity/parity.h"

namespace sprig::parity {

inline std::vector<Case> rms_norm_cases() {
  using testing::rand_normal;
  std::vector<Case> cases;
  uint64_t seed = 0;
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t R : {1, 17, 33, 97, 1025})
      for (int64_t H : {31, 33, 1024}) {
        const unsigned where = R == 33 ? kEmu : R > 33 ? kCuda : kEveryDevice;
        cases.push_back({case_name("rms_norm", dt, {R, H}), where, [=](Backend b) {
                           const Tensor x = on(b, rand_normal({R, H}, seed + 1, dt)),
                                        w = on(b, rand_normal({H}, seed + 2, dt)),
                                        dy = on(b, rand_normal({R, H}, seed + 3, dt));
                           Tensor y, rstd;
                           if (b == kEmu) {
                             y = nan_like(x),
                             rstd = Tensor::full({R}, NAN, DType::f32);  // rstd is f32
                             cuda::rms_norm(x, w, y, rstd, 1e-6, nullptr);
                           } else {
                             std::tie(y, rstd) = rms_norm(x, w, 1e-6);
                           }
                           std::vector<Output> out = {
                               {"y", y}, {"rstd", rstd, H, 1.0 / static_cast<double>(H)}};
                           const std::vector<DType> dw_dtypes =
                               dt == DType::f32 ? std::vector{dt} : std::vector{DType::f32, dt};
                           for (DType dw_dt : dw_dtypes) {
                             const Tensor dw = on(b, Tensor::ones({H}, dw_dt));
                             Tensor dx;
                             if (b == kEmu) {
                               dx = nan_like(x);
                               cuda::rms_norm_backward(dy, x, w, rstd, dx, dw, nullptr);
                             } else {
                               dx = rms_norm_backward(dy, x, w, rstd, dw);
                             }
                             const std::string into =
                                 std::string(" (dw ") + dtype_name(dw_dt) + ")";
                             out.push_back({"dx" + into, dx, H});  // each row's correction sums H
                             out.push_back({"dw" + into, dw, R});  // summed over the R rows
                           }
                           return out;
                         }});
        seed += 3;
      }
  cases.push_back({"rms_norm f32 [6, 5, 64] strided", kCuda, [](Backend b) {
                     const Tensor x = rand_normal({6, 5, 64}, 100), w = rand_normal({64}, 101);
                     return std::vector<Output>{
                         {"y", rms_norm(testing::non_contiguous(on(b, x)), on(b, w), 1e-6).first}};
                   }});
  return cases;
}

}  // namespace sprig::parity
