// The parity tables of the GRU (GPU only), f32 and bf16: gru_cell and its backward on awkward
// sizes (the scalar and 16-byte vector paths) and strided inputs, the backward from the CPU's
// gates; the autograd gru's output and gradients. Tolerances scale with each output's largest
// value on the CPU.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "autograd/functions.h"
#include "tensor/ops.h"
#include "tests/parity/parity.h"

namespace sprig::parity {

// Largest |value| of a tensor: the `scale` of a parity tolerance.
inline double max_abs(const Tensor& t) {
  const Tensor host = t.to(Device::cpu());
  return testing::max_abs_diff(host, Tensor::zeros(host.shape()));
}

inline std::vector<Case> gru_cell_cases() {
  using testing::non_contiguous;
  std::vector<Case> cases;
  uint64_t seed = 400;
  const auto add_case = [&](const std::string& name, DType dt, int64_t R, int64_t G, uint64_t s,
                            bool strided) {
    cases.push_back({name, kCuda, [=](Backend b) {
                       const auto input = [&](const Tensor& host) {
                         return strided ? non_contiguous(on(b, host)) : on(b, host);
                       };
                       const Tensor gi = mul(testing::rand_normal({R, 3 * G}, s + 1, dt), 2.0);
                       const Tensor gh = mul(testing::rand_normal({R, 3 * G}, s + 2, dt), 2.0);
                       const Tensor h_prev = testing::rand_uniform({R, G}, -1, 1, s + 3, dt);
                       const Tensor dh = testing::rand_normal({R, G}, s + 4, dt);
                       const GruCell cell = gru_cell(input(gi), input(gh), input(h_prev));
                       // The backward from the same gates on every device: the CPU's.
                       const Tensor gates = gru_cell(gi, gh, h_prev).gates;
                       const GruCellGrads g =
                           gru_cell_backward(input(dh), input(h_prev), on(b, gates));
                       return std::vector<Output>{{"h", cell.h},
                                                  {"gates", cell.gates},
                                                  {"dgi", g.dgi, 1, max_abs(g.dgi)},
                                                  {"dgh", g.dgh, 1, max_abs(g.dgh)},
                                                  {"dh_prev", g.dh_prev, 1, max_abs(g.dh_prev)}};
                     }});
  };
  for (DType dt : {DType::f32, DType::bf16})
    for (const auto& [R, G] : {std::pair<int64_t, int64_t>{1, 1},
                               {17, 31},
                               {33, 17},
                               {97, 64},
                               {31, 1024},
                               {1025, 33}}) {
      add_case(case_name("gru_cell", dt, {R, G}), dt, R, G, seed, false);
      seed += 4;
    }
  add_case("gru_cell f32 [33, 8] strided", DType::f32, 33, 8, 449, true);
  return cases;
}

inline std::vector<Case> gru_autograd_cases() {
  struct Dims {
    int64_t R, T, E, G;
  };
  std::vector<Case> cases;
  uint64_t seed = 500;
  for (DType dt : {DType::f32, DType::bf16})
    for (const Dims& c : {Dims{33, 5, 31, 17}, Dims{97, 3, 64, 64}, Dims{17, 1, 33, 128}}) {
      cases.push_back(
          {case_name("gru", dt, {c.R, c.T, c.E}) + " G=" + std::to_string(c.G), kCuda,
           [=](Backend b) {
             const double k = 1 / std::sqrt(static_cast<double>(c.G));
             const Var x(on(b, testing::rand_normal({c.R, c.T, c.E}, seed + 1, dt)), true);
             const Var w_ih(on(b, testing::rand_uniform({3 * c.G, c.E}, -k, k, seed + 2, dt)),
                            true);
             const Var w_hh(on(b, testing::rand_uniform({3 * c.G, c.G}, -k, k, seed + 3, dt)),
                            true);
             const Tensor dy = on(b, testing::rand_normal({c.R, c.T, c.G}, seed + 4, dt));
             const Var out = gru(x, w_ih, w_hh);
             out.backward(dy);
             // Each value depends, through the recurrence, on the E + 3G products of every step's
             // GEMMs; the weight gradients also sum over the R * T rows.
             const int64_t chain = c.T * (c.E + 3 * c.G), rows = c.R * c.T;
             return std::vector<Output>{{"out", out.value(), chain, max_abs(out.value())},
                                        {"dx", x.grad(), chain, max_abs(x.grad())},
                                        {"dw_ih", w_ih.grad(), chain + rows, max_abs(w_ih.grad())},
                                        {"dw_hh", w_hh.grad(), chain + rows, max_abs(w_hh.grad())}};
           }});
      seed += 4;
    }
  return cases;
}

}  // namespace sprig::parity
