// `sprig bench ops`: every GEMM shape and memory-bound kernel of a transformer training step, timed
// through sprig's public ops (tensor/ops.h, so allocation and dispatch are included) and compared
// with a ceiling measured in the same run (tools/bench/reference.h):
//   - GEMM: the vendor library called directly on the same shape (cuBLASLt on CUDA, Eigen on CPU);
//   - memory-bound kernels: the copy bandwidth of large buffers (cudaMemcpyAsync device to device
//     on CUDA, memcpy on every OpenMP thread on CPU).
// Bandwidth counts the bytes a kernel must move: each input read once and each output written once
// (a tensor updated in place counts twice), taken from the tensors' actual sizes. A copy of N bytes
// moves 2N. GEMM FLOPs are 2*M*N*K.
// Sizes: CUDA uses bf16 activations (f32 AdamW state with bf16 gradients and compute copy, as in
// mixed-precision training) at hidden sizes >= 1024 and 128 MiB or more per tensor; CPU uses f32 at
// 16 MiB per tensor.
#include "tools/bench/ops_bench.h"

#include <omp.h>

#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "tensor/cuda/kernels.h"
#include "tensor/ops.h"
#include "tensor/random.h"
#include "tools/bench/reference.h"

namespace sprig::bench {

namespace {

// out = op(a) @ op(b): a [m, k], or [k, m] transposed (a weight gradient's activations); b [k, n],
// or [n, k] transposed (a Linear layer's weight).
struct GemmShape {
  int64_t m, k, n;
  bool trans_b, trans_a = false;
};

// Sizes, repetitions and ratio goals for one device.
struct Config {
  DType dtype;             // activations
  int64_t rows, hidden;    // rms_norm, swiglu, softmax and adamw act on [rows, hidden]
  Shape rope;              // [B, T, nH, D]
  int64_t ce_rows, vocab;  // cross-entropy logits [ce_rows, vocab]
  std::vector<GemmShape> gemms;
  int64_t copy_bytes;  // per buffer of the copy ceiling
  int warmup, reps;
  double gemm_goal, memory_goal;  // minimum ratios to the ceilings
};

Config config_for(Device device, bool quick) {
  const int64_t shrink = quick ? 4 : 1;
  if (device.is_cuda()) {
    return {.dtype = DType::bf16,
            .rows = 32768 / shrink,
            .hidden = 2048,
            .rope = {4, 4096 / shrink, 32, 128},
            .ce_rows = 4096 / shrink,
            .vocab = 151936,
            .gemms = {{4096, 1024, 3072, false},
                      {4096, 1024, 1024, false},
                      {4096, 1024, 3072, true},
                      {4096, 3072, 1024, true},
                      {4096, 1024, 151936, true}},
            .copy_bytes = int64_t{1} << 30,
            .warmup = quick ? 1 : 3,
            .reps = quick ? 3 : 20,
            .gemm_goal = 0.95,
            .memory_goal = 0.80};
  }
  return {.dtype = DType::f32,
          .rows = 2048 / shrink,
          .hidden = 2048,
          .rope = {2, 1024 / shrink, 16, 128},
          .ce_rows = 256 / shrink,
          .vocab = 16384,
          .gemms = {{512, 1024, 1024, false},
                    {512, 1024, 3072, true},
                    {1024, 512, 1024, false, true},
                    {1024, 512, 1024, true, true}},
          .copy_bytes = int64_t{64} << 20,
          .warmup = 1,
          .reps = quick ? 3 : 7,
          .gemm_goal = 0.90,
          .memory_goal = 0.50};
}

// A tensor whose rows all repeat one random row: cheap to create at benchmark sizes (values are
// drawn on the host), and values do not change a kernel's memory traffic.
Tensor random_rows(const Shape& shape, DType dtype, Device device, Generator& gen) {
  const Tensor row = normal({shape.back()}, 0.0, 1.0, dtype, device, gen);
  return row.expand(shape).contiguous();
}

// Bytes read plus bytes written (undefined tensors count 0).
double traffic(const std::vector<Tensor>& read, const std::vector<Tensor>& written) {
  double bytes = 0;
  for (const auto* list : {&read, &written})
    for (const Tensor& t : *list)
      if (t.defined()) bytes += static_cast<double>(t.nbytes());
  return bytes;
}

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string time_str(double seconds) {
  return seconds < 1e-3 ? format("%.1f us", seconds * 1e6) : format("%.2f ms", seconds * 1e3);
}

// One measured row of the table: `rate` and `ceiling` in `unit`.
struct Row {
  std::string op, shape;
  double seconds, rate, ceiling;
  std::string unit, ceiling_name;
  double goal;
};

class OpsBench {
 public:
  OpsBench(Device device, const Config& config) : device_(device), c_(config) {}

  // Measures the copy ceiling: two buffers of copy_bytes, each copy moving 2 * copy_bytes.
  void measure_copy() {
    const Tensor src = Tensor::zeros({c_.copy_bytes / 4}, DType::f32, device_);
    const Tensor dst = Tensor::empty(src.shape(), DType::f32, device_);
    const double s = median_seconds(device_, c_.warmup, c_.reps, reference_copy(src, dst));
    copy_gbps_ = traffic({src}, {dst}) / s / 1e9;
  }

  void memory_bound(const std::string& op, const Shape& shape, double bytes,
                    const std::function<void()>& fn) {
    const double s = median_seconds(device_, c_.warmup, c_.reps, fn);
    rows_.push_back(
        {op, shape_str(shape), s, bytes / s / 1e9, copy_gbps_, "GB/s", "copy", c_.memory_goal});
  }

  void gemm(const GemmShape& g, Generator& gen) {
    const Tensor a =
        random_rows(g.trans_a ? Shape{g.k, g.m} : Shape{g.m, g.k}, c_.dtype, device_, gen);
    const Tensor b =
        random_rows(g.trans_b ? Shape{g.n, g.k} : Shape{g.k, g.n}, c_.dtype, device_, gen);
    const Tensor out = Tensor::empty({g.m, g.n}, c_.dtype, device_);
    const double ours =
        median_seconds(device_, c_.warmup, c_.reps, [&] { matmul(a, b, g.trans_a, g.trans_b); });
    const double ref = median_seconds(device_, c_.warmup, c_.reps,
                                      reference_gemm(a, b, out, g.trans_a, g.trans_b));
    const bool gpu = device_.is_cuda();
    const double scale = gpu ? 1e12 : 1e9;
    const double flops =
        2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k);
    rows_.push_back({"matmul",
                     shape_str(a.shape()) + (g.trans_a ? "^T" : "") + " x " + shape_str(b.shape()) +
                         (g.trans_b ? "^T" : ""),
                     ours, flops / ours / scale, flops / ref / scale, gpu ? "TFLOP/s" : "GFLOP/s",
                     gpu ? "cuBLASLt" : "Eigen", c_.gemm_goal});
  }

  void print(std::ostream& out) const {
    const char* fmt = "%-23s %-32s %10s %17s %26s %6s %s\n";
    char line[256];
    std::snprintf(line, sizeof(line), fmt, "op", "shape", "time", "achieved", "ceiling (same run)",
                  "ratio", "goal");
    out << line;
    for (const Row& r : rows_) {
      const double ratio = r.rate / r.ceiling;
      const std::string goal = format(">= %.2f", r.goal) + (ratio >= r.goal ? " ok" : " BELOW");
      std::snprintf(line, sizeof(line), fmt, r.op.c_str(), r.shape.c_str(),
                    time_str(r.seconds).c_str(), (format("%.1f ", r.rate) + r.unit).c_str(),
                    (format("%.1f ", r.ceiling) + r.unit + " " + r.ceiling_name).c_str(),
                    format("%.2f", ratio).c_str(), goal.c_str());
      out << line;
    }
  }

  double copy_gbps() const { return copy_gbps_; }

 private:
  Device device_;
  Config c_;
  double copy_gbps_ = 0;
  std::vector<Row> rows_;
};

}  // namespace

void run_ops_bench(Device device, bool quick, std::ostream& out) {
  const Config c = config_for(device, quick);
  const std::string where =
      device.is_cuda() ? device.str() + " (" + cuda::device_name(device.index) + ")"
                       : "cpu (" + std::to_string(omp_get_max_threads()) + " OpenMP threads)";
  out << "sprig bench ops on " << where << ", " << dtype_name(c.dtype) << " activations, median of "
      << c.reps << " runs after " << c.warmup << " warm-up" << (quick ? " (quick)" : "") << "\n";
  OpsBench bench(device, c);
  bench.measure_copy();
  out << "copy ceiling: " << (c.copy_bytes >> 20) << " MiB "
      << (device.is_cuda() ? "cudaMemcpyAsync device to device" : "memcpy") << ", "
      << format("%.1f", bench.copy_gbps()) << " GB/s (bytes read + written)\n";

  Generator gen(0);
  for (const GemmShape& g : c.gemms) bench.gemm(g, gen);

  // Each op runs once untimed to get its outputs, whose sizes enter the byte count.
  const double eps = 1e-6;
  const Tensor x = random_rows({c.rows, c.hidden}, c.dtype, device, gen);
  const Tensor x2 = random_rows({c.rows, c.hidden}, c.dtype, device, gen);
  const Tensor w = random_rows({c.hidden}, c.dtype, device, gen);
  const std::pair<Tensor, Tensor> normed = rms_norm(x, w, eps);
  const Tensor &y = normed.first, &rstd = normed.second;  // the lambda below captures them
  bench.memory_bound("rms_norm", x.shape(), traffic({x, w}, {y, rstd}),
                     [&] { rms_norm(x, w, eps); });
  const Tensor dw = Tensor::zeros({c.hidden}, DType::f32, device);
  const Tensor dx = rms_norm_backward(y, x, w, rstd, dw);
  bench.memory_bound("rms_norm_backward", x.shape(), traffic({y, x, w, rstd, dw}, {dx, dw}),
                     [&] { rms_norm_backward(y, x, w, rstd, dw); });

  const Tensor q = random_rows(c.rope, c.dtype, device, gen);
  const Tensor pos =
      Tensor::arange(c.rope[1], DType::i64, device).expand({c.rope[0], c.rope[1]}).contiguous();
  const RopeFrequencies freqs = rope_frequencies(q.size(3), 1e6);
  const Tensor q_rot = rope(q, pos, freqs);
  bench.memory_bound("rope", q.shape(), traffic({q, pos}, {q_rot}), [&] { rope(q, pos, freqs); });
  const Tensor dq = rope_backward(q_rot, pos, freqs);
  bench.memory_bound("rope_backward", q.shape(), traffic({q_rot, pos}, {dq}),
                     [&] { rope_backward(q_rot, pos, freqs); });

  // A head transpose as attention makes ([rows, 16, d] -> [16, rows, d]): a strided copy.
  const Tensor heads = x.reshape({c.rows, 16, c.hidden / 16}).transpose(0, 1);
  const Tensor transposed = heads.contiguous();
  bench.memory_bound("contiguous (transpose)", heads.shape(), traffic({transposed}, {transposed}),
                     [&] { heads.contiguous(); });

  const Tensor h = swiglu(x, x2);
  bench.memory_bound("swiglu", x.shape(), traffic({x, x2}, {h}), [&] { swiglu(x, x2); });
  const auto [dgate, dup] = swiglu_backward(x, x2, h);
  bench.memory_bound("swiglu_backward", x.shape(), traffic({x, x2, h}, {dgate, dup}),
                     [&] { swiglu_backward(x, x2, h); });

  const Tensor p = softmax(x);
  bench.memory_bound("softmax", x.shape(), traffic({x}, {p}), [&] { softmax(x); });
  const Tensor dsoft = softmax_backward(p, x);
  bench.memory_bound("softmax_backward", x.shape(), traffic({p, x}, {dsoft}),
                     [&] { softmax_backward(p, x); });

  const Tensor logits = random_rows({c.ce_rows, c.vocab}, c.dtype, device, gen);
  const Tensor targets = randint({c.ce_rows}, 0, c.vocab, DType::i64, device, gen);
  const CrossEntropyResult ce = cross_entropy(logits, targets);
  bench.memory_bound("cross_entropy", logits.shape(), traffic({logits, targets}, {ce.loss, ce.lse}),
                     [&] { cross_entropy(logits, targets); });
  const Tensor dloss = Tensor::ones({c.ce_rows}, DType::f32, device);
  const Tensor dlogits = cross_entropy_backward(dloss, logits, targets, ce.lse);
  bench.memory_bound("cross_entropy_backward", logits.shape(),
                     traffic({dloss, logits, targets, ce.lse}, {dlogits}),
                     [&] { cross_entropy_backward(dloss, logits, targets, ce.lse); });

  const Shape params{c.rows, c.hidden};  // AdamW over rows * hidden parameters
  const Tensor param = random_rows(params, DType::f32, device, gen);
  const Tensor grad = random_rows(params, c.dtype, device, gen);
  const Tensor exp_avg = Tensor::zeros(params, DType::f32, device);
  const Tensor exp_avg_sq = Tensor::zeros(params, DType::f32, device);
  // Mixed precision (16-bit activations): the gradient and the updated compute copy are 16-bit.
  const Tensor copy = c.dtype == DType::f32 ? Tensor() : Tensor::empty(params, c.dtype, device);
  const AdamWParams hp{.lr = 1e-4, .weight_decay = 0.1};
  bench.memory_bound(
      "adamw", params,
      traffic({param, grad, exp_avg, exp_avg_sq}, {param, exp_avg, exp_avg_sq, copy}),
      [&] { adamw_step(param, grad, exp_avg, exp_avg_sq, hp, copy); });

  bench.print(out);
}

}  // namespace sprig::bench
