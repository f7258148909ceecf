// `sprig bench ops`: GEMM throughput and memory-bound kernel bandwidth, each next to the ceiling
// measured in the same run (see ops_bench.cpp).
#pragma once

#include <iosfwd>

#include "tensor/tensor.h"

namespace sprig::bench {

// Runs every case on `device` and prints the table to `out`; `quick` shrinks the memory-bound
// sizes and the number of repetitions (a smoke run, not a measurement to keep).
void run_ops_bench(Device device, bool quick, std::ostream& out);

}  // namespace sprig::bench
