// CPU tests of the GRU: gru_cell against a naive f64 step written here, its backward and the
// autograd gru against central differences in f64 (T = 4, 1 and 0), gru against PyTorch's nn.GRU
// (tests/golden/make_gru_golden.py), bf16 against f32, frozen inputs, and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "tensor/ops.h"
#include "tensor/safetensors.h"
#include "tests/autograd/gradcheck_util.h"
#include "tests/tensor/op_test_util.h"
#include "tests/test_util.h"

namespace sprig {
namespace {

using testing::all_close;
using testing::grad_ok;
using testing::non_contiguous;
using testing::numeric_grad;
using testing::rand_normal;
using testing::rand_uniform;
using testing::randn64;
using testing::throws_invalid;

// One GRU step in f64 from the formulas, element by element: {h [R, G], gates [R, 4G]}.
GruCell naive_cell(const Tensor& gi, const Tensor& gh, const Tensor& h_prev) {
  const int64_t R = h_prev.size(0), G = h_prev.size(1);
  const std::vector<double> x = gi.to_vector<double>(), y = gh.to_vector<double>();
  const std::vector<double> p = h_prev.to_vector<double>();
  std::vector<double> h(static_cast<size_t>(R * G)), gates(static_cast<size_t>(R * 4 * G));
  const auto sigmoid = [](double v) { return 1 / (1 + std::exp(-v)); };
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < G; ++j) {
      const auto at = [&](const std::vector<double>& v, int64_t block) {
        return v[static_cast<size_t>(i * 3 * G + block * G + j)];
      };
      const double r = sigmoid(at(x, 0) + at(y, 0)), z = sigmoid(at(x, 1) + at(y, 1));
      const double n = std::tanh(at(x, 2) + r * at(y, 2));
      h[static_cast<size_t>(i * G + j)] = (1 - z) * n + z * p[static_cast<size_t>(i * G + j)];
      const double values[4] = {r, z, n, at(y, 2)};
      for (int64_t b = 0; b < 4; ++b) gates[static_cast<size_t>(i * 4 * G + b * G + j)] = values[b];
    }
  return {Tensor::from_vector(h, {R, G}), Tensor::from_vector(gates, {R, 4 * G})};
}

struct CellInputs {
  Tensor gi, gh, h_prev;
};

// Pre-activations of size about 2 (some gates saturate a little), h_prev in (-1, 1).
CellInputs cell_inputs(int64_t R, int64_t G, uint64_t seed, DType dtype) {
  return {mul(rand_normal({R, 3 * G}, seed, dtype), 2.0),
          mul(rand_normal({R, 3 * G}, seed + 1, dtype), 2.0),
          rand_uniform({R, G}, -1, 1, seed + 2, dtype)};
}

TEST(GruCell, MatchesNaiveStep) {
  for (DType dt : {DType::f64, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    const CellInputs in = cell_inputs(5, 300, 10, dt);  // G > one 256-column chunk
    const GruCell got = gru_cell(in.gi, in.gh, in.h_prev);
    const GruCell want = naive_cell(in.gi, in.gh, in.h_prev);
    // Values and gates are O(1); f32 is one rounding plus exp and tanh a few ulps apart.
    const double tol = dt == DType::f64 ? 1e-12 : 1e-6;
    EXPECT_TRUE(all_close(got.h, want.h, tol));
    EXPECT_TRUE(all_close(got.gates, want.gates, tol));
  }
}

TEST(GruCell, Bf16MatchesF32OnTheSameInputs) {
  // Inputs rounded to bf16 first: the bf16 kernel differs from f32 only by its output rounding.
  const CellInputs in = cell_inputs(7, 40, 20, DType::bf16);
  const auto f32 = [](const Tensor& t) { return t.to(DType::f32); };
  const GruCell got = gru_cell(in.gi, in.gh, in.h_prev);
  const GruCell want = gru_cell(f32(in.gi), f32(in.gh), f32(in.h_prev));
  EXPECT_EQ(got.h.dtype(), DType::bf16);
  EXPECT_TRUE(all_close(got.h, want.h, 1e-6, 1.0 / 256));  // bf16: 8 significant bits
  EXPECT_TRUE(all_close(got.gates, want.gates, 1e-6, 1.0 / 256));
  const Tensor dh = rand_normal({7, 40}, 23, DType::bf16);
  const GruCellGrads g = gru_cell_backward(dh, in.h_prev, got.gates);
  const GruCellGrads w = gru_cell_backward(f32(dh), f32(in.h_prev), f32(got.gates));
  EXPECT_TRUE(all_close(g.dgi, w.dgi, 1e-6, 1.0 / 256));
  EXPECT_TRUE(all_close(g.dgh, w.dgh, 1e-6, 1.0 / 256));
  EXPECT_TRUE(all_close(g.dh_prev, w.dh_prev, 1e-6, 1.0 / 256));
}

TEST(GruCell, BackwardMatchesFiniteDifferences) {
  const CellInputs in = cell_inputs(3, 6, 30, DType::f64);
  const Tensor dh = randn64({3, 6}, 33);
  const GruCellGrads g = gru_cell_backward(dh, in.h_prev, gru_cell(in.gi, in.gh, in.h_prev).gates);
  // L = sum(h * dh) through each input with the other two fixed: dh_prev is the direct part.
  const auto h_of_gi = [&](const Tensor& p) { return gru_cell(p, in.gh, in.h_prev).h; };
  const auto h_of_gh = [&](const Tensor& p) { return gru_cell(in.gi, p, in.h_prev).h; };
  const auto h_of_prev = [&](const Tensor& p) { return gru_cell(in.gi, in.gh, p).h; };
  EXPECT_TRUE(all_close(g.dgi, numeric_grad(h_of_gi, in.gi, dh), 1e-8));
  EXPECT_TRUE(all_close(g.dgh, numeric_grad(h_of_gh, in.gh, dh), 1e-8));
  EXPECT_TRUE(all_close(g.dh_prev, numeric_grad(h_of_prev, in.h_prev, dh), 1e-8));
}

TEST(GruCell, StridedInputsAndIntoSlices) {
  const CellInputs in = cell_inputs(6, 4, 40, DType::f32);
  const GruCell want = gru_cell(in.gi, in.gh, in.h_prev);
  const GruCell strided =
      gru_cell(non_contiguous(in.gi), non_contiguous(in.gh), non_contiguous(in.h_prev));
  EXPECT_TRUE(all_close(strided.h, want.h, 0.0));
  EXPECT_TRUE(all_close(strided.gates, want.gates, 0.0));
  // Rows with a stride (one step of a batch-major [R, T, .] buffer) are read and written in
  // place; the _into forms write their slices and nothing else.
  const Tensor gi_seq = Tensor::zeros({6, 3, 12});
  gi_seq.select(1, 2).copy_(in.gi);
  const Tensor hs = Tensor::full({6, 3, 4}, 7.0), gates = Tensor::full({3, 6, 16}, 7.0);
  gru_cell_into(gi_seq.select(1, 2), in.gh, in.h_prev, {hs.select(1, 1), gates.select(0, 1)});
  EXPECT_TRUE(all_close(hs.select(1, 1), want.h, 0.0));
  EXPECT_TRUE(all_close(gates.select(0, 1), want.gates, 0.0));
  EXPECT_TRUE(all_close(hs.select(1, 0), Tensor::full({6, 4}, 7.0), 0.0));
  EXPECT_TRUE(all_close(hs.select(1, 2), Tensor::full({6, 4}, 7.0), 0.0));
  EXPECT_TRUE(all_close(gates.select(0, 2), Tensor::full({6, 16}, 7.0), 0.0));
  const Tensor dh = rand_normal({6, 4}, 43);
  const GruCellGrads g = gru_cell_backward(dh, in.h_prev, want.gates);
  const Tensor dgi = Tensor::empty({6, 2, 12}), dgh = Tensor::empty({6, 12});
  const Tensor dh_prev = Tensor::empty({6, 4});
  gru_cell_backward_into(non_contiguous(dh), in.h_prev, want.gates,
                         {dgi.select(1, 1), dgh, dh_prev});
  EXPECT_TRUE(all_close(dgi.select(1, 1), g.dgi, 0.0));
  EXPECT_TRUE(all_close(dgh, g.dgh, 0.0));
  EXPECT_TRUE(all_close(dh_prev, g.dh_prev, 0.0));
}

TEST(GruCell, RejectsBadInputs) {
  const Tensor gi = Tensor::zeros({2, 6}), hp = Tensor::zeros({2, 2});
  EXPECT_TRUE(throws_invalid([&] { gru_cell(Tensor::zeros({6}), gi, hp); },
                             "[gru_cell] gi must have 2 dimensions, got 1 (shape [6])"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru_cell(Tensor::zeros({2, 7}), Tensor::zeros({2, 7}), hp);
      },
      "[gru_cell] gi must be [R, 3G], got [2, 7] (7 columns is not a multiple of 3)"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru_cell(gi, Tensor::zeros({2, 9}), hp);
      },
      "[gru_cell] gh must have shape [2, 6], got [2, 9]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru_cell(gi, gi, Tensor::zeros({3, 2}));
      },
      "[gru_cell] h_prev must have shape [2, 2], got [3, 2]"));
  EXPECT_TRUE(throws_invalid([&] { gru_cell(gi, gi.to(DType::bf16), hp); },
                             "[gru_cell] dtype mismatch: f32 and bf16"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru_cell(gi, gi, Tensor::zeros({2, 2}, DType::i64));
      },
      "[gru_cell] h_prev must be a floating tensor, got i64"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru_cell_into(gi, gi, hp, {Tensor::zeros({2, 2}).t(), Tensor::zeros({2, 8})});
      },
      "[gru_cell] h must have unit column stride and non-overlapping rows, got strides [1, 2]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru_cell_into(gi, gi, hp, {Tensor::zeros({1, 2}).expand({2, 2}), Tensor::zeros({2, 8})});
      },
      "[gru_cell] h must have unit column stride and non-overlapping rows, got strides [0, 1]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru_cell_into(gi, gi, hp, {hp, Tensor::zeros({2, 6})});
      },
      "[gru_cell] gates must have shape [2, 8], got [2, 6]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru_cell_backward(hp, hp, Tensor::zeros({2, 6}));
      },
      "[gru_cell_backward] gates must have shape [2, 8], got [2, 6]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru_cell_backward(hp, Tensor::zeros({2, 3}), gi);
      },
      "[gru_cell_backward] h_prev must have shape [2, 2], got [2, 3]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru_cell_backward_into(hp, hp, Tensor::zeros({2, 8}), {gi, Tensor::zeros({2, 3}), hp});
      },
      "[gru_cell_backward] dgh must have shape [2, 6], got [2, 3]"));
}

// x [R, T, E] and weights of size about 1/sqrt(G), as nn.GRU initialises them.
struct GruInputs {
  Tensor x, w_ih, w_hh;
};
GruInputs gru_inputs(int64_t R, int64_t T, int64_t E, int64_t G, uint64_t seed, DType dtype) {
  const double k = 1 / std::sqrt(static_cast<double>(G));
  return {rand_normal({R, T, E}, seed, dtype), rand_uniform({3 * G, E}, -k, k, seed + 1, dtype),
          rand_uniform({3 * G, G}, -k, k, seed + 2, dtype)};
}

TEST(Gru, GradcheckIncludingOneAndZeroSteps) {
  for (int64_t T : {4, 1}) {
    SCOPED_TRACE("T = " + std::to_string(T));
    // Weights of size 1 rather than 1/sqrt(G): larger gradients through every gate.
    const GruInputs in = gru_inputs(3, T, 5, 6, 50 + T, DType::f64);
    const auto f = [](const std::vector<Var>& v) { return gru(v[0], v[1], v[2]); };
    EXPECT_TRUE(grad_ok(f, {in.x, mul(in.w_ih, 2.4), mul(in.w_hh, 2.4)}));
  }
  // T = 0: the weights get zero gradients (x, with no elements, is a constant here).
  const GruInputs in = gru_inputs(3, 0, 5, 6, 50, DType::f64);
  const auto f = [&](const std::vector<Var>& v) { return gru(Var(in.x), v[0], v[1]); };
  EXPECT_TRUE(grad_ok(f, {in.w_ih, in.w_hh}));
}

TEST(Gru, OutputShapesAtZeroAndOneSteps) {
  const GruInputs in = gru_inputs(3, 1, 5, 6, 60, DType::f32);
  const Var x(in.x, true), w_ih(in.w_ih, true), w_hh(in.w_hh, true);
  const Var out = gru(x, w_ih, w_hh);
  ASSERT_EQ(out.shape(), (Shape{3, 1, 6}));
  // One step from h = 0 is gru_cell with gh = 0; W_hh gets a zero gradient.
  const Tensor gi = matmul(in.x.view({3, 5}), in.w_ih, false, true);
  const GruCell cell = gru_cell(gi, Tensor::zeros({3, 18}), Tensor::zeros({3, 6}));
  EXPECT_TRUE(all_close(out.value().view({3, 6}), cell.h, 0.0));
  out.backward(Tensor::ones({3, 1, 6}));
  EXPECT_TRUE(all_close(w_hh.grad(), Tensor::zeros({18, 6}), 0.0));
  const Var x0(Tensor::zeros({3, 0, 5}), true), w0(in.w_ih, true);
  const Var empty = gru(x0, w0, w_hh);
  EXPECT_EQ(empty.shape(), (Shape{3, 0, 6}));
  empty.backward(Tensor::zeros({3, 0, 6}));
  EXPECT_EQ(x0.grad().shape(), (Shape{3, 0, 5}));
  EXPECT_TRUE(all_close(w0.grad(), Tensor::zeros({18, 5}), 0.0));
}

// The fixture of tests/golden/make_gru_golden.py: PyTorch's nn.GRU in f64.
class GruGolden : public ::testing::Test {
 protected:
  SafetensorsFile file{testing::source_dir() + "/tests/golden/gru_expected.safetensors"};
  // Tensor `name` of the fixture in `dtype`, rounded to `rounded` on the way.
  Tensor load(const std::string& name, DType dtype, DType rounded = DType::f64) const {
    return file.load(name).to(rounded).to(dtype);
  }

  // gru in `dtype` on the fixture's inputs (rounded to `rounded` first); the gradients of
  // sum(out * c) in `grads`.
  Tensor run(DType dtype, std::vector<Tensor>& grads, DType rounded = DType::f64) const {
    const Var x(load("x", dtype, rounded), true), w_ih(load("weight_ih_l0", dtype, rounded), true);
    const Var w_hh(load("weight_hh_l0", dtype, rounded), true);
    const Var out = gru(x, w_ih, w_hh);
    out.backward(load("c", dtype, rounded));
    grads = {x.grad(), w_ih.grad(), w_hh.grad()};
    return out.value();
  }
};

TEST_F(GruGolden, MatchesPyTorchInF64AndF32) {
  const char* names[] = {"grad.x", "grad.weight_ih_l0", "grad.weight_hh_l0"};
  // f64: roundings only (values and gradients are O(1), up to 4.5); f32: about 1e-7 relative per
  // operation through 5 steps, GEMMs of up to 15 terms (measured: 5e-7 on dW_ih's largest value).
  for (const auto& [dtype, tol] : {std::pair{DType::f64, 1e-12}, std::pair{DType::f32, 2e-6}}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::vector<Tensor> grads;
    EXPECT_TRUE(all_close(run(dtype, grads), load("out", DType::f64), tol, tol));
    for (size_t i = 0; i < grads.size(); ++i)
      EXPECT_TRUE(all_close(grads[i], load(names[i], DType::f64), tol, tol)) << names[i];
  }
}

TEST_F(GruGolden, Bf16StaysCloseToF32) {
  // f32 on the bf16-rounded inputs, so only bf16's arithmetic differs.
  std::vector<Tensor> want, got;
  const Tensor out32 = run(DType::f32, want, DType::bf16);
  const Tensor out16 = run(DType::bf16, got);
  want.insert(want.begin(), out32);
  got.insert(got.begin(), out16);
  // bf16 rounds every GEMM result, gate, hidden state and gradient to 2^-9 relative; through 5
  // steps forward and back the worst element is 0.7% of its tensor's largest value (dW_ih).
  for (size_t i = 0; i < got.size(); ++i) {
    const double scale = testing::max_abs_diff(want[i], Tensor::zeros(want[i].shape()));
    EXPECT_TRUE(all_close(got[i], want[i], 2e-2 * scale)) << i;
  }
}

TEST(Gru, FrozenInputsGetNoGradientAndChangeNothingElse) {
  const GruInputs in = gru_inputs(2, 3, 4, 5, 70, DType::f64);
  const Tensor dy = randn64({2, 3, 5}, 73);
  // Every combination of which inputs require grad gives the same gradients for those that do.
  std::vector<Tensor> all;
  for (int mask = 7; mask >= 1; --mask) {
    SCOPED_TRACE("requires_grad mask " + std::to_string(mask));
    const Var x(in.x, mask & 1), w_ih(in.w_ih, mask & 2), w_hh(in.w_hh, mask & 4);
    gru(x, w_ih, w_hh).backward(dy);
    const Var* vars[] = {&x, &w_ih, &w_hh};
    for (int i = 0; i < 3; ++i) {
      if (mask == 7) all.push_back(vars[i]->grad());
      if (mask & (1 << i))
        EXPECT_TRUE(all_close(vars[i]->grad(), all[static_cast<size_t>(i)], 0.0));
      else
        EXPECT_FALSE(vars[i]->grad().defined());
    }
  }
}

TEST(Gru, NoGradModeGivesTheSameValues) {
  const GruInputs in = gru_inputs(2, 3, 4, 5, 80, DType::f32);
  const Var w_ih(in.w_ih, true), w_hh(in.w_hh, true);
  const Tensor with_grad = gru(Var(in.x), w_ih, w_hh).value();
  NoGradGuard no_grad;
  const Var out = gru(Var(in.x), w_ih, w_hh);
  EXPECT_FALSE(out.requires_grad());
  EXPECT_TRUE(all_close(out.value(), with_grad, 0.0));
}

TEST(Gru, RejectsBadShapes) {
  const Var x(Tensor::zeros({3, 4, 5})), w_ih(Tensor::zeros({18, 5})), w_hh(Tensor::zeros({18, 6}));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru(Var(Tensor::zeros({3, 4})), w_ih, w_hh);
      },
      "[gru] x must be [R, T, E], got [3, 4]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru(x, w_ih, Var(Tensor::zeros({18, 5})));
      },
      "[gru] w_hh must be [3G, G], got [18, 5]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru(x, Var(Tensor::zeros({18, 4})), w_hh);
      },
      "[gru] w_ih must be [3G, E] = [18, 5] for x [3, 4, 5] and w_hh "
      "[18, 6], got [18, 4]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru(x, Var(Tensor::zeros({15, 5})), w_hh);
      },
      "[gru] w_ih must be [3G, E] = [18, 5] for x [3, 4, 5] and w_hh "
      "[18, 6], got [15, 5]"));
  EXPECT_TRUE(throws_invalid(
      [&] {
        gru(x, Var(Tensor::zeros({18, 5}, DType::f64)), w_hh);
      },
      "[gru] x, w_ih and w_hh must share one floating dtype, got f32, f64 "
      "and f32"));
}

}  // namespace
}  // namespace sprig
