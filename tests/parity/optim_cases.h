// The parity table of AdamW: three steps (the second scaled, as a clipped one is) on 1025 x 33
// parameters with f32 and bf16 gradients, without a compute copy and with bf16 and f16 ones.
#pragma once

#include <optional>
#include <string>

#include "tensor/cuda/kernels.h"
#include "tensor/ops.h"
#include "tests/parity/parity.h"

namespace sprig::parity {

inline std::vector<Case> adamw_cases() {
  std::vector<Case> cases;
  const Shape shape = {1025, 33};
  for (DType grad_dt : {DType::f32, DType::bf16})
    for (std::optional<DType> copy_dt :
         {std::optional<DType>(), std::optional(DType::bf16), std::optional(DType::f16)}) {
      const std::string name =
          case_name("adamw", grad_dt, shape) + " copy " + (copy_dt ? dtype_name(*copy_dt) : "none");
      cases.push_back(
          {name, kEveryDevice, [=](Backend b) {
             const Tensor p = on(b, testing::rand_normal(shape, 10)),
                          m = on(b, Tensor::zeros(shape)), v = on(b, Tensor::zeros(shape));
             const Tensor copy = copy_dt ? on(b, Tensor::full(shape, NAN, *copy_dt)) : Tensor();
             for (int64_t step = 1; step <= 3; ++step) {
               const AdamWParams hp{.lr = 1e-2,
                                    .beta1 = 0.9,
                                    .beta2 = 0.95,
                                    .eps = 1e-8,
                                    .weight_decay = 0.1,
                                    .step = step,
                                    .grad_scale = step == 2 ? 0.3 : 1.0};
               const Tensor g = on(b, testing::rand_uniform(shape, -1, 1, 20 + step, grad_dt));
               if (b == kEmu)
                 cuda::adamw(p, g, m, v, copy, hp, nullptr);
               else
                 adamw_step(p, g, m, v, hp, copy);
             }
             // A few correctly rounded ops per element with the same scalars on
             // every device: scales well below the values' sizes (p ~ 1, m ~ 0.1,
             // v ~ 0.05).
             std::vector<Output> out = {
                 {"param", p, 1, 0.1}, {"exp_avg", m, 1, 1e-2}, {"exp_avg_sq", v, 1, 1e-3}};
             if (copy_dt)  // the copy is the updated parameter, exactly
               out.push_back({"copy - param",
                              sub(copy.to(DType::f32), p.to(*copy_dt).to(DType::f32)), 1, 1.0,
                              true});
             return out;
           }});
    }
  return cases;
}

}  // namespace sprig::parity
