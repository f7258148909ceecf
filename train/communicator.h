// Data-parallel communicators (docs/architecture.md, data parallel): one process per device,
// launched by mpirun. A Communicator reduces and broadcasts over every rank of the run:
//   - single process: world size 1, every operation the identity;
//   - MPI: CPU tensors and host values over MPI_COMM_WORLD (Open MPI);
//   - NCCL: CUDA tensors on a stream of its own, ordered after the compute stream by events, the
//     communicator created from an ncclUniqueId broadcast over MPI; host values go over MPI.
// The MPI and NCCL backends are plugins (libsprig_mpi.so, libsprig_nccl.so, which link the
// libraries), loaded only when a launcher starts several ranks: sprig itself links neither
// library, and a single process needs neither to be installed.
// Every rank must call every collective in the same order with the same sizes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace sprig {

enum class Reduction { sum, min, max };

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int64_t rank() const { return 0; }
  virtual int64_t world_size() const { return 1; }
  virtual int64_t local_rank() const { return 0; }  // the rank among the ranks on this host
  virtual std::string backend() const { return "single process"; }

  // In place over every rank: a contiguous tensor on the backend's device, or host values.
  virtual void all_reduce(const Tensor& tensor, Reduction op) {
    (void)tensor;
    (void)op;
  }
  virtual void all_reduce(std::vector<double>& values, Reduction op) {
    (void)values;
    (void)op;
  }
  double all_reduce(double value, Reduction op) {
    std::vector<double> v{value};
    all_reduce(v, op);
    return v[0];
  }
  virtual void broadcast(const Tensor& tensor, int64_t root) {
    (void)tensor;
    (void)root;
  }
  // Every rank's `text`, in rank order.
  virtual std::vector<std::string> all_gather(const std::string& text) { return {text}; }

  // Sharded collectives (optimizer and gradient sharding), in place over a contiguous tensor
  // `full` of world_size() equal shards: shard q holds elements [q n / W, (q + 1) n / W) of its
  // n, which must be a multiple of W. reduce_scatter leaves in this rank's shard the reduction over
  // every rank of that shard (the other shards are then unspecified); all_gather_shards sets every
  // shard q to rank q's shard q. With one rank both leave `full` as it is. Throws
  // std::invalid_argument "[<backend>] ..." for a tensor they cannot take.
  virtual void reduce_scatter(const Tensor& full, Reduction op) {
    (void)op;
    check_shards(full, "reduce_scatter");
  }
  virtual void all_gather_shards(const Tensor& full) { check_shards(full, "all_gather_shards"); }
  // This rank's shard of `full` (a flat view of it).
  Tensor shard(const Tensor& full) const;
  virtual void barrier() {}

  // Gradient all-reduces overlapped with backward: start_sum begins a sum whose result is there
  // once finish_sums returns. Backends that cannot overlap (MPI on CPU) sum at once.
  virtual bool overlaps_backward() const { return false; }
  virtual void start_sum(const Tensor& tensor) { all_reduce(tensor, Reduction::sum); }
  virtual void finish_sums() {}

  // The elements of one shard of `full`; throws "[what] ..." unless it is contiguous and splits
  // into world_size() equal shards.
  int64_t check_shards(const Tensor& full, const std::string& what) const;

  // Ends every rank of the run with `code` (a rank that failed calls it so that no other rank
  // waits in a collective for it). A single process exits.
  [[noreturn]] virtual void abort(int code);
};

// A communicator of world size 1 (what a run without mpirun uses).
Communicator& single_process();

// The communicator of this process: MPI (with NCCL for CUDA runs) when mpirun (or another PMI
// launcher) started it with more than one rank, else a single process. Call it before anything
// touches CUDA: a rank of a CUDA run selects the device of its local rank (cudaSetDevice).
// `cuda` says whether the run computes on CUDA. Throws std::runtime_error when launched with
// several ranks by a sprig built without MPI (or a CUDA run without NCCL).
std::unique_ptr<Communicator> launch_communicator(bool cuda);

// The CUDA device a rank of a CUDA run computes on: its local rank among the devices it sees
// (local_rank % device_count), so a launcher that gives each rank one device through
// CUDA_VISIBLE_DEVICES and one that shows every rank all devices both work. Throws
// std::runtime_error "[launch] ..." when it sees none.
int device_for_local_rank(int64_t local_rank, int device_count);

// The number of ranks the launcher says this process is part of (1 without a launcher), from its
// environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_SIZE).
int64_t launcher_world_size();

// The MPI plugin's direct all-reduce (sum, in place) of `count` floats over MPI_COMM_WORLD: the
// library's own call that `sprig bench comm` compares with. Loads the plugin (an MPI communicator
// must exist).
void mpi_reference_all_reduce(float* data, int64_t count);

}  // namespace sprig
