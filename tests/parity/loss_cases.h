// The parity tables of the row losses, f32 and bf16, on awkward row counts and vocabularies
// (V = 1001 takes the scalar path, the others the 16-byte vector path; rows of 32000 run 512
// threads in f32, 256 in bf16, rows of 65536 1024 in both): cross-entropy (loss, lse, argmax,
// dlogits) and forward KL (kl, lses, dstudent; with teacher rows, the student argmax). The GPU runs
// 97 and 1025 rows, the emulation 33 (a row is a CTA of 256 to 1024 threads) and rows of 65536.
// Every backward gets the CPU's lses: the forward's are checked on their own, and one ulp of
// difference in a lse (the devices sum in other orders) moves the gradient entries that cancel
// beyond their 1 / V-scaled tolerance.
#pragma once

#include <string>
#include <vector>

#include "tensor/cuda/kernels.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tests/parity/parity.h"

namespace sprig::parity {

struct LossShape {
  int64_t rows, vocab;
  unsigned on;
};

// Targets in [0, V) with every fifth row ignored (-100).
inline Tensor some_targets(int64_t rows, int64_t V, uint64_t seed) {
  std::vector<int64_t> t(rows);
  Generator gen(seed);
  for (int64_t r = 0; r < rows; ++r) t[r] = r % 5 == 4 ? -100 : gen.next_int(0, V);
  return Tensor::from_vector(t, {rows});
}

// An index output the kernel must overwrite (no index is -1).
inline Tensor unset_indices(const Tensor& like) {
  return Tensor::full(like.shape(), -1, DType::i64);
}

inline std::vector<Case> cross_entropy_cases() {
  const LossShape shapes[] = {{1, 1000, kEveryDevice}, {17, 32000, kEveryDevice}, {97, 1001, kCuda},
                              {1025, 1000, kCuda},     {33, 1001, kEmu},          {33, 1000, kEmu},
                              {3, 65536, kEmu}};
  std::vector<Case> cases;
  uint64_t seed = 0;
  for (DType dt : {DType::f32, DType::bf16})
    for (const LossShape& s : shapes) {
      cases.push_back(
          {case_name("cross_entropy", dt, {s.rows, s.vocab}), s.on, [=](Backend b) {
             const Tensor logits = testing::rand_normal({s.rows, s.vocab}, seed + 1, dt);
             const Tensor t = some_targets(s.rows, s.vocab, seed + 2);
             const Tensor dloss = testing::rand_normal({s.rows}, seed + 3);
             const Tensor cpu_lse = cross_entropy(logits, t).lse;
             CrossEntropyResult r;
             Tensor dlogits, in_place;  // the gradient written over a copy of the logits
             if (b == kEmu) {
               r = {nan_like(cpu_lse), nan_like(cpu_lse), unset_indices(cpu_lse)};
               cuda::cross_entropy(logits, t, r.loss, r.lse, r.argmax, -100, nullptr);
               dlogits = nan_like(logits);
               cuda::cross_entropy_backward(dloss, logits, t, cpu_lse, dlogits, -100, nullptr);
               in_place = logits.clone();
               cuda::cross_entropy_backward(dloss, in_place, t, cpu_lse, in_place, -100, nullptr);
             } else {
               r = cross_entropy(on(b, logits), on(b, t), -100, true);
               dlogits =
                   cross_entropy_backward(on(b, dloss), on(b, logits), on(b, t), on(b, cpu_lse));
               in_place = on(b, logits).clone();
               cross_entropy_backward(on(b, dloss), in_place, on(b, t), on(b, cpu_lse), -100,
                                      in_place);
             }
             // dloss * (softmax - onehot): entries of size about 1 / V that can cancel.
             return std::vector<Output>{
                 {"loss", r.loss},
                 {"lse", r.lse},
                 {"argmax", r.argmax, 1, 1.0, true},
                 {"dlogits", dlogits, 1, 1.0 / static_cast<double>(s.vocab)},
                 {"dlogits in place", in_place, 1, 1.0 / static_cast<double>(s.vocab)}};
           }});
      seed += 3;
    }
  return cases;
}

// Forward KL at temperatures 1 and 2; with `teacher_rows`, teachers named by row (the rows
// reversed, every other one repeated) at temperature 1.5 and the student argmax.
inline std::vector<Case> kl_div_cases(bool teacher_rows) {
  const LossShape all[] = {
      {1, 1000, kEveryDevice}, {17, 32000, kEveryDevice}, {97, 1001, kCuda}, {33, 1001, kEmu}};
  std::vector<LossShape> shapes(teacher_rows ? all + 1 : all, all + 4);
  const std::vector<double> temperatures =
      teacher_rows ? std::vector<double>{1.5} : std::vector<double>{1.0, 2.0};
  std::vector<Case> cases;
  uint64_t seed = teacher_rows ? 200 : 100;
  for (DType dt : {DType::f32, DType::bf16})
    for (const LossShape& s : shapes)
      for (double temp : temperatures) {
        const std::string name =
            case_name(teacher_rows ? "kl_div rows" : "kl_div", dt, {s.rows, s.vocab}) +
            " T=" + std::to_string(temp);
        cases.push_back(
            {name, s.on, [=](Backend b) {
               const Tensor teacher = testing::rand_normal({s.rows, s.vocab}, seed + 1, dt);
               const Tensor student = testing::rand_normal({s.rows, s.vocab}, seed + 2, dt);
               const Tensor dkl = testing::rand_normal({s.rows}, seed + 3);
               Tensor rows;
               if (teacher_rows) {
                 std::vector<int32_t> index(static_cast<size_t>(s.rows));
                 for (int64_t r = 0; r < s.rows; ++r)
                   index[r] = static_cast<int32_t>((s.rows - 1 - r) & ~1);
                 rows = Tensor::from_vector(index, {s.rows});
               }
               const KLResult cpu = kl_div(teacher, student, temp, rows, teacher_rows);
               KLResult r;
               Tensor dstudent;
               if (b == kEmu) {
                 r = {nan_like(cpu.kl), nan_like(cpu.kl), nan_like(cpu.kl),
                      teacher_rows ? unset_indices(cpu.kl) : Tensor()};
                 cuda::kl_div(teacher, student, rows, r.kl, r.teacher_lse, r.student_lse,
                              r.student_argmax, temp, nullptr);
                 dstudent = nan_like(student);
                 cuda::kl_div_backward(dkl, teacher, student, rows, cpu.teacher_lse,
                                       cpu.student_lse, dstudent, temp, nullptr);
               } else {
                 const Tensor on_rows = rows.defined() ? on(b, rows) : rows;
                 r = kl_div(on(b, teacher), on(b, student), temp, on_rows, teacher_rows);
                 const KLResult fed = {
                     on(b, cpu.kl), on(b, cpu.teacher_lse), on(b, cpu.student_lse), {}};
                 dstudent = kl_div_backward(on(b, dkl), on(b, teacher), on(b, student), fed, temp,
                                            on_rows);
               }
               const double inv_v = 1.0 / static_cast<double>(s.vocab);
               // kl sums V terms of size about 1 / V; dkl * (q - p) / T has entries
               // of size about 1 / V that can cancel.
               std::vector<Output> out = {{"kl", r.kl, s.vocab, inv_v},
                                          {"teacher_lse", r.teacher_lse},
                                          {"student_lse", r.student_lse},
                                          {"dstudent", dstudent, 1, inv_v}};
               if (teacher_rows) out.push_back({"student_argmax", r.student_argmax, 1, 1.0, true});
               return out;
             }});
        seed += 3;
      }
  return cases;
}

}  // namespace sprig::parity
