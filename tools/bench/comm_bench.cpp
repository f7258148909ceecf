// `sprig bench comm`, run as every rank of `mpirun -np N sprig bench comm`: the all-reduce (sum,
// f32) of sprig's communicator against the library's own call on the same buffer (MPI_Allreduce
// on CPU ranks), as bus bandwidth in nccl-tests' definition: busbw = bytes / time * 2 (N - 1) / N.
// Each size is timed as the slowest rank's median over the repetitions, the two calls alternating.
// Rank 0 prints.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "tools/commands.h"
#include "tools/options.h"
#include "train/communicator.h"

namespace sprig::tools {

namespace {

struct CommBenchOptions {
  int64_t max_mib = 64;
  int repeats = 20;
};

// The slowest rank's median times of `a` and `b`, timed alternately (so that both see the same
// machine), each call started together on every rank.
std::pair<double, double> median_seconds(Communicator& comm, int repeats,
                                         const std::function<void()>& a,
                                         const std::function<void()>& b) {
  a();  // warm-up
  b();
  std::vector<double> times_a, times_b;
  const auto time = [&](const std::function<void()>& fn, std::vector<double>& times) {
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  for (int i = 0; i < repeats; ++i) {
    time(a, times_a);
    time(b, times_b);
  }
  const auto median = [&](std::vector<double>& t) {
    std::nth_element(t.begin(), t.begin() + repeats / 2, t.end());
    return comm.all_reduce(t[repeats / 2], Reduction::max);
  };
  return {median(times_a), median(times_b)};
}

void run_comm_bench(const CommBenchOptions& o) {
  const std::unique_ptr<Communicator> comm = launch_communicator(false);
  const int64_t n = comm->world_size();
  const bool lead = comm->rank() == 0;
  if (n == 1) {
    std::printf(
        "bench comm: one rank, nothing to reduce; run it as mpirun -np 2 sprig bench comm\n");
    return;
  }
  const double bus = 2.0 * static_cast<double>(n - 1) / static_cast<double>(n);
  if (lead)
    std::printf(
        "bench comm: all-reduce sum of f32 over %lld ranks (%s), bus bandwidth GB/s\n"
        "%10s %14s %14s %8s\n",
        static_cast<long long>(n), comm->backend().c_str(), "MiB", "sprig", "library", "ratio");
  for (int64_t mib = 1; mib <= o.max_mib; mib *= 4) {
    const int64_t numel = mib * (int64_t{1} << 20) / 4;
    const Tensor buffer = Tensor::ones({numel});
    const double bytes = static_cast<double>(numel) * 4;
    const auto sprig_call = [&] { comm->all_reduce(buffer, Reduction::sum); };
    const auto library_call = [&] {
      mpi_reference_all_reduce(static_cast<float*>(buffer.data_ptr()), numel);
    };
    const auto [sprig_s, library_s] = median_seconds(*comm, o.repeats, sprig_call, library_call);
    const double sprig_bw = bytes / sprig_s * bus / 1e9, library_bw = bytes / library_s * bus / 1e9;
    if (lead)
      std::printf("%10lld %14.2f %14.2f %7.2fx\n", static_cast<long long>(mib), sprig_bw,
                  library_bw, sprig_bw / library_bw);
  }
  if (lead) std::printf("target: ratio >= 0.9x\n");
}

}  // namespace

void add_bench_comm_command(CLI::App& bench) {
  auto o = std::make_shared<CommBenchOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "comm",
      "All-reduce bus bandwidth of sprig's communicator against MPI's own call on the same "
      "buffer; run it under mpirun (mpirun -np 2 sprig bench comm)");
  add_int_option(cmd, "--max-mib", o->max_mib, "largest buffer, MiB (sizes 1, 4, 16, ...)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  add_int_option(cmd, "--repeats", o->repeats, "timed calls per size")
      ->check(kPositive)
      ->capture_default_str();
  cmd->callback([o] { run_comm_bench(*o); });
}

}  // namespace sprig::tools
