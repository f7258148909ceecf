// Run by tests/train/data_parallel_mpi.cpp as every rank of `mpirun -np N`: checks each collective
// of the MPI communicator and the gradient buckets against values every rank can compute, prints
// "rank R of N: ok" and exits 0, or prints the first mismatch and exits 1.
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "train/communicator.h"
#include "train/gradient_buckets.h"

namespace sprig {
namespace {

int failures = 0;

template <class T>
void expect(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  if (got == want) return;
  ++failures;
  std::cerr << what << ": got";
  for (const T& v : got) std::cerr << " " << v;
  std::cerr << ", want";
  for (const T& v : want) std::cerr << " " << v;
  std::cerr << "\n";
}

int run() {
  const std::unique_ptr<Communicator> comm = launch_communicator(false);
  const int64_t r = comm->rank(), n = comm->world_size();
  // Rank r holds {r + 1, -r, 10 r}: sums, minima and maxima have closed forms.
  const double sum_r = static_cast<double>(n * (n - 1) / 2);
  for (const DType dtype : {DType::f32, DType::f64, DType::i64}) {
    const Tensor base = Tensor::from_vector<double>(
        {static_cast<double>(r + 1), static_cast<double>(-r), static_cast<double>(10 * r)}, {3});
    const std::string name = dtype_name(dtype);
    Tensor t = base.to(dtype).clone();
    comm->all_reduce(t, Reduction::sum);
    expect(t.to(DType::f64).to_vector<double>(), {sum_r + n, -sum_r, 10 * sum_r}, name + " sum");
    t = base.to(dtype).clone();
    comm->all_reduce(t, Reduction::min);
    expect(t.to(DType::f64).to_vector<double>(), {1.0, -(n - 1.0), 0.0}, name + " min");
    t = base.to(dtype).clone();
    comm->all_reduce(t, Reduction::max);
    expect(t.to(DType::f64).to_vector<double>(), {static_cast<double>(n), 0.0, 10.0 * (n - 1)},
           name + " max");
  }
  std::vector<double> host = {0.5 * static_cast<double>(r), 1.0};
  comm->all_reduce(host, Reduction::sum);
  expect(host, {0.5 * sum_r, static_cast<double>(n)}, "host sum");
  expect<double>({comm->all_reduce(static_cast<double>(r), Reduction::max)},
                 {static_cast<double>(n - 1)}, "host max");

  const Tensor b = Tensor::full({4}, static_cast<double>(r == 1 ? 7 : r), DType::f32);
  comm->broadcast(b, 1);
  expect(b.to_vector<float>(), {7, 7, 7, 7}, "broadcast from rank 1");

  std::vector<std::string> want;  // rank q says q copies of "q" (rank 0: the empty string)
  for (int64_t q = 0; q < n; ++q) want.push_back(std::string(q, static_cast<char>('0' + q)));
  expect(comm->all_gather(want[r]), want, "all_gather");

  // Sharded collectives over n shards of 3: rank q holds (q + 1) (j + 1) at element j, so shard r
  // of the sum holds (j + 1) n (n + 1) / 2, of the minimum (j + 1) and of the maximum n (j + 1).
  for (const DType dtype : {DType::f32, DType::f64, DType::i64}) {
    const std::string name = dtype_name(dtype);
    std::vector<double> mine(static_cast<size_t>(3 * n));
    for (int64_t j = 0; j < 3 * n; ++j)
      mine[static_cast<size_t>(j)] = double(r + 1) * double(j + 1);
    const Tensor base = Tensor::from_vector(mine, {n, 3}).to(dtype);
    for (const auto& [op, factor] : {std::pair{Reduction::sum, double(n * (n + 1) / 2)},
                                     {Reduction::min, 1.0},
                                     {Reduction::max, double(n)}}) {
      const Tensor full = base.clone();
      comm->reduce_scatter(full, op);
      std::vector<double> want;
      for (int64_t i = 0; i < 3; ++i) want.push_back(double(3 * r + i + 1) * factor);
      expect(comm->shard(full).to(DType::f64).to_vector<double>(), want,
             name + " reduce_scatter " + std::to_string(static_cast<int>(op)));
    }
    // Rank q's shard holds 100 q + i; gathered, every rank holds all of them.
    const Tensor full = Tensor::full({3 * n}, -1.0, dtype);
    comm->shard(full).copy_(
        Tensor::from_vector<double>({100.0 * r, 100.0 * r + 1, 100.0 * r + 2}, {3}).to(dtype));
    comm->all_gather_shards(full);
    std::vector<double> want;
    for (int64_t q = 0; q < n; ++q)
      for (int64_t i = 0; i < 3; ++i) want.push_back(100.0 * q + i);
    expect(full.to(DType::f64).to_vector<double>(), want, name + " all_gather_shards");
  }

  // Buckets: rank r's gradient of sum((r + 1) * w * w) is 2 (r + 1) w; summed, n (n + 1) w.
  Var w(Tensor::from_vector<float>({1, 2, 3}, {3}), true), v(Tensor::ones({2}), true);
  GradientBuckets buckets({w, v}, *comm, 8);
  buckets.arm(true);
  sum_all(w * w * static_cast<double>(r + 1) + sum_all(v)).backward();
  buckets.backward_done();
  buckets.sum();
  const float k = static_cast<float>(n * (n + 1));
  expect(w.grad().to_vector<float>(), {k, 2 * k, 3 * k}, "bucket sum of w");
  expect(v.grad().to_vector<float>(), {3.0f * n, 3.0f * n}, "bucket sum of v");

  // Sharded gradients: two backwards, each reduce-scattered as it ends; this rank's shard of each
  // bucket (v's, then w's, each padded to a multiple of n) holds its part of both sums.
  Var ws(Tensor::from_vector<float>({1, 2, 3}, {3}), true), vs(Tensor::ones({2}), true);
  GradientBuckets sharded({ws, vs}, *comm, 8, /*shard_gradients=*/true);
  for (int step = 0; step < 2; ++step) {
    sharded.arm(step == 1);
    sum_all(ws * ws * static_cast<double>(r + 1) + sum_all(vs)).backward();
    sharded.backward_done();
  }
  sharded.sum();
  const std::vector<std::vector<float>> wholes = {{6.0f * n, 6.0f * n}, {2 * k, 4 * k, 6 * k}};
  for (size_t b = 0; b < wholes.size(); ++b) {
    std::vector<float> whole = wholes[b];
    whole.resize(static_cast<size_t>(sharded.padded_numel(b)), 0.0f);
    const size_t size = whole.size() / static_cast<size_t>(n);
    expect(sharded.shard(b).to_vector<float>(),
           std::vector<float>(whole.begin() + static_cast<std::ptrdiff_t>(r * size),
                              whole.begin() + static_cast<std::ptrdiff_t>((r + 1) * size)),
           "sharded gradients of bucket " + std::to_string(b));
  }
  // What each rank keeps: 1/n of the whole (padded) buckets.
  if (sharded.gradient_bytes() * n != (sharded.padded_numel(0) + sharded.padded_numel(1)) * 4 ||
      buckets.gradient_bytes() != (buckets.padded_numel(0) + buckets.padded_numel(1)) * 4) {
    std::cerr << "rank " << r << ": sharded gradients keep " << sharded.gradient_bytes()
              << " bytes, whole buckets " << buckets.gradient_bytes() << "\n";
    ++failures;
  }
  if (ws.grad().defined() || vs.grad().defined()) {
    std::cerr << "rank " << r << ": a parameter kept its gradient after the reduce-scatter\n";
    ++failures;
  }
  comm->barrier();
  if (failures) return 1;
  std::cout << "rank " << r << " of " << n << " (" << comm->backend() << "): ok\n";
  return 0;
}

}  // namespace
}  // namespace sprig

int main() {
  try {
    return sprig::run();
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
