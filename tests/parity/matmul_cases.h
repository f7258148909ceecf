// The parity tables of matmul (cuBLASLt on the GPU, Eigen on the CPU; GPU only): every transpose
// combination, batched and broadcast b, awkward sizes, f32, bf16, f16 and f64; and its backward.
#pragma once

#include <string>
#include <vector>

#include "tensor/ops.h"
#include "tests/parity/parity.h"

namespace sprig::parity {

// The stored shape of an operand [rows, cols] after op, 2-D when batch is 0.
inline Shape stored_shape(int64_t batch, int64_t rows, int64_t cols, bool trans) {
  Shape s = trans ? Shape{cols, rows} : Shape{rows, cols};
  if (batch > 0) s.insert(s.begin(), batch);
  return s;
}

inline std::string matmul_name(const std::string& op, DType dt, const Shape& a, const Shape& b,
                               bool ta, bool tb) {
  return case_name(op, dt, a) + " @ " + shape_str(b) + (ta ? " ta" : "") + (tb ? " tb" : "");
}

inline std::vector<Case> matmul_cases() {
  struct Dims {
    int64_t m, k, n;
  };
  std::vector<Case> cases;
  uint64_t seed = 500;
  for (DType dt : {DType::f32, DType::bf16, DType::f16, DType::f64})
    for (const Dims& d : {Dims{1, 1, 1}, Dims{17, 31, 33}, Dims{97, 1025, 17}, Dims{33, 97, 1025},
                          Dims{1, 1025, 31}})
      for (int64_t batch : {0, 3})
        for (bool broadcast : {false, true}) {
          if (batch == 0 && broadcast) continue;
          for (bool ta : {false, true})
            for (bool tb : {false, true}) {
              const Shape a_shape = stored_shape(batch, d.m, d.k, ta),
                          b_shape = stored_shape(broadcast ? 0 : batch, d.k, d.n, tb);
              cases.push_back(
                  {matmul_name("matmul", dt, a_shape, b_shape, ta, tb), kCuda, [=](Backend on_) {
                     const Tensor a = on(on_, testing::rand_normal(a_shape, seed + 1, dt));
                     const Tensor b = on(on_, testing::rand_normal(b_shape, seed + 2, dt));
                     return std::vector<Output>{{"out", matmul(a, b, ta, tb), d.k}};
                   }});
              seed += 2;
            }
        }
  return cases;
}

inline std::vector<Case> matmul_backward_cases() {
  const int64_t B = 3, M = 17, K = 97, N = 33;
  std::vector<Case> cases;
  uint64_t seed = 800;
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t b_batch : {int64_t{0}, B})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const Shape a_shape = stored_shape(B, M, K, ta),
                      b_shape = stored_shape(b_batch, K, N, tb);
          cases.push_back(
              {matmul_name("matmul_backward", dt, a_shape, b_shape, ta, tb), kCuda,
               [=](Backend on_) {
                 const Tensor a = on(on_, testing::rand_normal(a_shape, seed + 1, dt));
                 const Tensor b = on(on_, testing::rand_normal(b_shape, seed + 2, dt));
                 const Tensor dy = on(on_, testing::rand_normal({B, M, N}, seed + 3, dt));
                 const auto [da, db] = matmul_backward(a, b, dy, ta, tb);
                 // db of a broadcast b sums over the batch too: B * M terms.
                 return std::vector<Output>{{"da", da, N}, {"db", db, B * M}};
               }});
          seed += 3;
        }
  return cases;
}

}  // namespace sprig::parity
