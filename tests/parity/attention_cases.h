// The parity tables of attention: the flash kernels, on the CUDA device and on the emulated one,
// against the dense f64 reference of tests/attention/flash_reference.h under FlashAttention's
// rule (the error of out, dq, dk, dv is at most 2x the error of a naive implementation in the
// inputs' precision, plus 1e-3; the lse's at most 1e-3), both dQ modes (atomic and
// deterministic, whose dK and dV must be the same bits), and exact zeros where no key reaches a
// row or no row a key. Every mask kind (causal, packed documents with a different mask per batch
// row and a window, prefix trees, DFlash blocks) at head dims 64 and 128: on the GPU lengths 1
// to 1025 with GQA 1:1, 2:1 and 8:1, on the emulation (every thread on the CPU) shorter ones with
// GQA 1:1 and 4:1. A device runs the problem through its runner (flash_test::FlashRunner), given
// by the test.
#pragma once

#include <string>
#include <vector>

#include "tensor/ops.h"
#include "tests/attention/flash_reference.h"
#include "tests/parity/parity.h"

namespace sprig::parity {

// The values of `t` ([B, T, heads, D]) at the rows (or keys) of each batch row that `seen` leaves
// out, as one host f64 vector.
inline Tensor unseen_values(const flash_test::Problem& p, const Tensor& t, bool keys) {
  const int64_t Tq = p.q_len(), Tk = p.k_len(), T = keys ? Tk : Tq;
  const int64_t width = t.numel() / (p.batch * T);
  const std::vector<double> v = t.to(Device::cpu()).to_vector<double>();
  std::vector<double> out;
  for (int64_t b = 0; b < p.batch; ++b) {
    const std::vector<int32_t> allowed = p.mask.row(b).dense().to_vector<int32_t>();
    std::vector<bool> seen(static_cast<size_t>(T));
    for (int64_t i = 0; i < Tq; ++i)
      for (int64_t j = 0; j < Tk; ++j)
        if (allowed[i * Tk + j]) seen[keys ? j : i] = true;
    for (int64_t r = 0; r < T; ++r)
      if (!seen[r])
        out.insert(out.end(), v.begin() + (b * T + r) * width, v.begin() + (b * T + r + 1) * width);
  }
  return Tensor::from_vector(out, {static_cast<int64_t>(out.size())});
}

// What a run gives (the reference's, or a device's atomic and deterministic runs), by name.
inline std::vector<Output> attention_outputs(const flash_test::Problem& p,
                                             const flash_test::Outputs& f,
                                             const flash_test::Outputs& det) {
  return {
      {"out", f.out},
      {"lse", f.lse},
      {"dq", f.dq},
      {"dk", f.dk},
      {"dv", f.dv},
      {"dq (deterministic)", det.dq},
      {"dk deterministic - atomic", sub(det.dk, f.dk), 1, 1.0, true},
      {"dv deterministic - atomic", sub(det.dv, f.dv), 1, 1.0, true},
      {"out of rows no key reaches", unseen_values(p, f.out, false), 1, 1.0, true},
      {"dq of rows no key reaches", unseen_values(p, f.dq, false), 1, 1.0, true},
      {"dq (deterministic) of rows no key reaches", unseen_values(p, det.dq, false), 1, 1.0, true},
      {"dk of keys no row reaches", unseen_values(p, f.dk, true), 1, 1.0, true},
      {"dv of keys no row reaches", unseen_values(p, f.dv, true), 1, 1.0, true}};
}

// One problem: on the CPU the reference with each output's bound, on a device `run`'s atomic and
// deterministic runs (and with `rerun`, the deterministic dQ again, which must be the same bits).
inline Case attention_case(const flash_test::Problem& p, uint64_t seed, unsigned where,
                           const flash_test::FlashRunner& run, bool rerun) {
  const std::string name =
      "attention T " + std::to_string(p.q_len()) + "x" + std::to_string(p.k_len()) + " D " +
      std::to_string(p.head_dim) + " heads " + std::to_string(p.q_heads) + ":" +
      std::to_string(p.kv_heads) + " batch " + std::to_string(p.batch) + " " + dtype_name(p.dtype);
  return {
      name, where, [=](Backend b) {
        const flash_test::Inputs host = flash_test::random_inputs(p, seed);
        if (b != kCpu) {
          const flash_test::Outputs f = run(p, host, false), det = run(p, host, true);
          std::vector<Output> out = attention_outputs(p, f, det);
          if (rerun)
            out.push_back({"dq deterministic rerun - first", sub(run(p, host, true).dq, det.dq), 1,
                           1.0, true});
          return out;
        }
        const flash_test::Outputs ref =
            flash_test::dense_attention<double>(p, host, [](double x) { return x; });
        const flash_test::Outputs naive = flash_test::dense_attention<float>(p, host, [&](float x) {
          return p.dtype == DType::bf16 ? static_cast<float>(bf16(x)) : static_cast<float>(f16(x));
        });
        std::vector<Output> out = attention_outputs(p, ref, ref);
        // FlashAttention's rule; scores stay fp32, so the lse is far tighter than the rule.
        const auto rule = [](const Tensor& naive_value, const Tensor& ref_value) {
          return 2 * testing::max_abs_diff(naive_value, ref_value) + 1e-3;
        };
        out[0].max_error = rule(naive.out, ref.out);
        out[1].max_error = 1e-3;
        out[2].max_error = out[5].max_error = rule(naive.dq, ref.dq);
        out[3].max_error = rule(naive.dk, ref.dk);
        out[4].max_error = rule(naive.dv, ref.dv);
        out.push_back(
            {"dq deterministic rerun - first", Tensor::zeros(ref.dq.shape()), 1, 1.0, true});
        return out;
      }};
}

// The problems of a mask kind: on the GPU lengths 1, 17, 97 and 1025 with 2 KV heads (1 at 1025),
// on the emulation `emu_lengths` with one.
inline std::vector<Case> flash_cases(flash_test::Kind kind, std::vector<int64_t> emu_lengths,
                                     const flash_test::FlashRunner& run, bool rerun) {
  std::vector<Case> cases;
  uint64_t seed = 100;
  for (int64_t t : {1, 17, 97, 1025})
    for (int64_t d : {64, 128})
      for (int64_t group : {1, 2, 8}) {
        const int64_t batch = t <= 97 ? 2 : 1, kv_heads = t <= 97 ? 2 : 1;
        cases.push_back(attention_case(
            {flash_test::make_mask(kind, t, batch), batch, group * kv_heads, kv_heads, d},
            seed += 10, kCuda, run, rerun));
      }
  seed = 100;
  for (int64_t t : emu_lengths)
    for (int64_t d : {64, 128})
      for (int64_t group : {1, 4}) {
        const int64_t batch = t <= 97 ? 2 : 1;
        cases.push_back(attention_case({flash_test::make_mask(kind, t, batch), batch, group, 1, d},
                                       seed += 10, kEmu, run, rerun));
      }
  return cases;
}

// Rows 0-149 see nothing (query tile 0 has no entries at all), keys 210-299 are seen by nobody.
inline std::vector<Case> fully_masked_cases(const flash_test::FlashRunner& run, bool rerun) {
  const Mask m{300, 300, {Rect{150, 300, 0, 150}, Rect{200, 260, 150, 210, RectKind::causal}}};
  std::vector<Case> cases;
  for (int64_t d : {64, 128}) {
    cases.push_back(attention_case({BatchMask(m), 2, 4, 2, d}, 7 + d, kCuda, run, rerun));
    cases.push_back(attention_case({BatchMask(m), 1, 2, 1, d}, 7 + d, kEmu, run, rerun));
  }
  return cases;
}

inline std::vector<Case> float16_cases(const flash_test::FlashRunner& run, bool rerun) {
  using flash_test::Kind;
  std::vector<Case> cases;
  for (int64_t d : {64, 128})
    cases.push_back(
        attention_case({flash_test::make_mask(Kind::documents, 97, 2), 2, 4, 2, d, DType::f16}, 3,
                       kCuda, run, rerun));
  cases.push_back(
      attention_case({flash_test::make_mask(Kind::documents, 97, 2), 2, 2, 1, 64, DType::f16}, 3,
                     kEmu, run, rerun));
  return cases;
}

}  // namespace sprig::parity
