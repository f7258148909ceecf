// `sprig bench`: benchmarks that print ratios against ceilings measured in the same run:
// `sprig bench ops [--device cpu|cuda|auto] [--quick]` (tools/bench/ops_bench.h), and the
// subcommands of the other files of tools/bench/ (attention, data, step, memory, draft, gru, comm,
// tokenize, and the hidden helpers of the scripts that compare against PyTorch).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "tensor/cuda/kernels.h"
#include "tools/bench/ops_bench.h"
#include "tools/commands.h"
#include "tools/options.h"

namespace sprig::tools {

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks (ratios against measured ceilings)");
  bench->require_subcommand(1);

  struct OpsOptions {
    std::string device = "auto";
    bool quick = false;
  };
  auto opts = std::make_shared<OpsOptions>();
  CLI::App* ops = bench->add_subcommand(
      "ops",
      "GEMM TFLOP/s against cuBLASLt (Eigen on CPU) and memory-bound kernel GB/s against "
      "the copy bandwidth");
  add_device_option(ops, opts->device);
  ops->add_flag("--quick", opts->quick, "smaller sizes and fewer repetitions (a smoke run)");
  ops->callback(
      [opts] { bench::run_ops_bench(resolve_device(opts->device), opts->quick, std::cout); });

  add_bench_attention_command(*bench);
  add_bench_data_command(*bench);
  add_bench_step_command(*bench);
  add_bench_memory_command(*bench);
  add_bench_draft_command(*bench);
  add_bench_gru_command(*bench);
  add_bench_comm_command(*bench);
  add_bench_tokenize_command(*bench);
  add_bench_torch_step_commands(*bench);
}

}  // namespace sprig::tools
