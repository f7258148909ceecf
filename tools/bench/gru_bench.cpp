// `sprig bench gru`: the GRU's forward and backward (autograd gru on x [rows, steps, input], then
// backward of a fixed upstream gradient into x and both weights) against the GEMMs it contains,
// timed alone through the same matmul ops on the same shapes in the same run:
//   forward   gi = x W_ih^T over rows * steps rows; steps - 1 hidden GEMMs h (rows, G) W_hh^T;
//   backward  steps - 1 carries dgh (rows, 3G) W_hh; dW_hh = dgh^T h over (steps - 1) * rows rows;
//             dW_ih = dgi^T x and dx = dgi W_ih over rows * steps rows.
// The difference is what the GRU adds around its GEMMs: the gate kernels, layout copies and
// autograd. Prints both median times, their ratio (target: gru / GEMMs <= 1.5x), the FLOPs and
// the achieved rates. Before the timed runs it prints an estimate of their duration from one
// hidden-step GEMM, so a shape too large for the machine can be shrunk with --rows.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "autograd/functions.h"
#include "tensor/cuda/kernels.h"
#include "tensor/random.h"
#include "tools/bench/memory_check.h"
#include "tools/bench/reference.h"
#include "tools/commands.h"
#include "tools/options.h"

namespace sprig::tools {

namespace {

struct GruBenchOptions {
  std::string device = "auto", dtype;
  int64_t rows = 4096, steps = 16, input = 1024, hidden = 1024;
  int repeats = 3;
};

// FLOPs of one GRU forward and backward: every GEMM three times (forward, and the two products
// of its backward), 2 per multiply-add.
double gru_flops(int64_t R, int64_t T, int64_t E, int64_t G) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  return 3.0 * (2.0 * d(R) * d(T) * d(E) * d(3 * G) + 2.0 * d(T - 1) * d(R) * d(G) * d(3 * G));
}

// Elements held at the peak (the GRU's backward, beside the GEMMs' buffers): per row of R * T,
// x, the GEMMs' dx and the GRU's (3E), dy and the GEMMs' h (2G), the GEMMs' gates (3G), the GRU's
// h (G), its gates (4G) and its backward's dgi and dgh (6G); both weights three times (themselves,
// the GEMMs' gradients and the GRU's), 9G(E + G).
double gru_elements(int64_t R, int64_t T, int64_t E, int64_t G) {
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  return d(R) * d(T) * (3 * d(E) + 16 * d(G)) + 9 * d(G) * (d(E) + d(G));
}

void run_gru_bench(const GruBenchOptions& o) {
  const Device device = resolve_device(o.device);
  const bool cuda = device.is_cuda();
  const DType dt = o.dtype.empty() ? (cuda ? DType::bf16 : DType::f32) : dtype_from_name(o.dtype);
  const int64_t R = o.rows, T = o.steps, E = o.input, G = o.hidden;
  bench::check_fits("bench gru",
                    "--rows " + std::to_string(R) + " --steps " + std::to_string(T) + " --input " +
                        std::to_string(E) + " --hidden " + std::to_string(G) + " in " +
                        dtype_name(dt),
                    gru_elements(R, T, E, G) * static_cast<double>(dtype_size(dt)), device);
  const double flops = gru_flops(R, T, E, G);
  const double unit = cuda ? 1e12 : 1e9;
  const char* unit_name = cuda ? "TFLOP/s" : "GFLOP/s";
  const std::string where =
      cuda ? device.str() + " (" + cuda::device_name(device.index) + ")"
           : "cpu (" + std::to_string(omp_get_max_threads()) + " OpenMP threads)";
  std::printf(
      "bench gru on %s, %s: x [%lld, %lld, %lld], hidden %lld; forward + backward %.1f GFLOP; "
      "median of %d runs after 1 warm-up\n",
      where.c_str(), dtype_name(dt), static_cast<long long>(R), static_cast<long long>(T),
      static_cast<long long>(E), static_cast<long long>(G), flops / 1e9, o.repeats);

  Generator gen(0);
  const double k = 1 / std::sqrt(static_cast<double>(G));
  const Tensor x = normal({R, T, E}, 0.0, 1.0, dt, device, gen);
  const Tensor w_ih = uniform({3 * G, E}, -k, k, dt, device, gen);
  const Tensor w_hh = uniform({3 * G, G}, -k, k, dt, device, gen);
  const Tensor dy = normal({R, T, G}, 0.0, 1.0, dt, device, gen);

  // GEMM operands and outputs: gate-shaped buffers hold gi in the forward and stand for dgi and
  // dgh in the backward (their values do not change a GEMM's time).
  const Tensor xs = x.view({R * T, E});
  const Tensor gates = Tensor::zeros({R * T, 3 * G}, dt, device);
  const Tensor hs = Tensor::zeros({T * R, G}, dt, device);
  const Tensor gh = Tensor::empty({R, 3 * G}, dt, device);
  const Tensor carry = Tensor::zeros({R, G}, dt, device);
  const Tensor dx = Tensor::empty({R * T, E}, dt, device);
  const Tensor dw_ih = Tensor::empty({3 * G, E}, dt, device);
  const Tensor dw_hh = Tensor::empty({3 * G, G}, dt, device);
  const auto step_rows = [&](const Tensor& t, int64_t s) { return t.narrow(0, s * R, R); };
  const auto gemms = [&] {
    matmul_into(xs, w_ih, gates, false, true, false);
    for (int64_t s = 1; s < T; ++s) matmul_into(step_rows(hs, s - 1), w_hh, gh, false, true, false);
    for (int64_t s = T - 1; s >= 1; --s)
      matmul_into(step_rows(gates, s), w_hh, carry, false, false, true);
    if (T > 1)
      matmul_into(gates.narrow(0, R, (T - 1) * R), hs.narrow(0, 0, (T - 1) * R), dw_hh, true, false,
                  false);
    matmul_into(gates, xs, dw_ih, true, false, false);
    matmul_into(gates, w_ih, dx, false, false, false);
  };

  // The estimate: every GEMM at one hidden-step GEMM's rate; the GRU and its GEMMs each run
  // 1 + repeats times, the GRU taking at least as long as its GEMMs.
  const double probe = bench::median_seconds(
      device, 1, 1, [&] { matmul_into(step_rows(hs, 0), w_hh, gh, false, true, false); });
  const double rate =
      2.0 * static_cast<double>(R) * static_cast<double>(G) * 3.0 * static_cast<double>(G) / probe;
  const double per_run = flops / rate;
  std::printf(
      "estimate at one hidden-step GEMM's rate (%.1f %s): %.1f s per run of the GEMMs, at least "
      "%.0f s in all%s\n",
      rate / unit, unit_name, per_run, 2 * per_run * (o.repeats + 1),
      !cuda && per_run > 30 ? " (--rows shrinks it)" : "");
  std::fflush(stdout);

  Var xv(x, true), wi(w_ih, true), wh(w_hh, true);
  const double gru_s = bench::median_seconds(device, 1, o.repeats, [&] {
    xv.zero_grad();
    wi.zero_grad();
    wh.zero_grad();
    gru(xv, wi, wh).backward(dy);
  });
  const double gemm_s = bench::median_seconds(device, 1, o.repeats, gemms);

  std::printf("%-22s %12s %14s\n", "", "time (ms)", unit_name);
  std::printf("%-22s %12.1f %14.1f\n", "gru forward+backward", gru_s * 1e3, flops / gru_s / unit);
  std::printf("%-22s %12.1f %14.1f\n", "its GEMMs alone", gemm_s * 1e3, flops / gemm_s / unit);
  std::printf("ratio gru / GEMMs: %.2fx (target <= 1.5x)\n", gru_s / gemm_s);
}

}  // namespace

void add_bench_gru_command(CLI::App& bench) {
  auto o = std::make_shared<GruBenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "gru", "GRU forward and backward against the GEMMs it contains, timed alone");
  add_int_option(cmd, "--rows", o->rows, "Sequences in the batch (R)")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--steps", o->steps, "Time steps (T)")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--input", o->input, "Input features (E)")
      ->check(kPositive)
      ->capture_default_str();
  add_int_option(cmd, "--hidden", o->hidden, "Hidden size (G)")
      ->check(kPositive)
      ->capture_default_str();
  add_device_option(cmd, o->device);
  cmd->add_option("--dtype", o->dtype, "f32, bf16, f16 or f64 (default: f32 CPU, bf16 CUDA)")
      ->check(CLI::IsMember({"f32", "bf16", "f16", "f64"}));
  add_int_option(cmd, "--repeats", o->repeats, "Timed runs of each measurement")
      ->check(kPositive)
      ->capture_default_str();
  cmd->callback([o] { run_gru_bench(*o); });
}

}  // namespace sprig::tools
