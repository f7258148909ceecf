// `sprig bench ops`: throughput of sprig's kernels next to the ceiling measured in the same run.
#include <CLI/CLI.hpp>
#include <iostream>

#include "tools/commands.h"

namespace sprig::tools {

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks (ratios against measured ceilings)");
  bench->require_subcommand(1);
  CLI::App* ops = bench->add_subcommand("ops", "GEMM TFLOP/s and memory-bound kernel GB/s");
  ops->callback([] { std::cout << "bench ops\n"; });
}

}  // namespace sprig::tools
