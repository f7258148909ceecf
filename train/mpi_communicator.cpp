// The MPI backend of train/communicator.h, built as the plugin libsprig_mpi.so (which links
// Open MPI; sprig loads it only for several ranks): CPU tensors and host values over
// MPI_COMM_WORLD. Its sprig symbols resolve against the executable that loads it.
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "train/communicator.h"

namespace sprig {

namespace {

MPI_Op mpi_op(Reduction op) {
  return op == Reduction::sum ? MPI_SUM : op == Reduction::min ? MPI_MIN : MPI_MAX;
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    default:
      throw std::invalid_argument(std::string("[mpi] cannot reduce ") + dtype_name(dtype) +
                                  " tensors (f32, f64, i32, i64 only)");
  }
}

void check_cpu_contiguous(const Tensor& t, const char* what) {
  if (!t.device().is_cpu() || !t.is_contiguous())
    throw std::invalid_argument(std::string("[mpi] ") + what +
                                " needs a contiguous CPU tensor, got one on " + t.device().str());
}

class MpiCommunicator : public Communicator {
 public:
  static constexpr int64_t kMaxCount = int64_t{1} << 30;  // elements per MPI call

  MpiCommunicator() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;  // only the training thread calls MPI
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    }
    int rank = 0, size = 1, local = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;  // the ranks sharing this host
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    rank_ = rank;
    size_ = size;
    local_ = local;
  }
  ~MpiCommunicator() override {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (!finalised) MPI_Finalize();
  }

  int64_t rank() const override { return rank_; }
  int64_t world_size() const override { return size_; }
  int64_t local_rank() const override { return local_; }
  std::string backend() const override { return "MPI"; }

  void all_reduce(const Tensor& t, Reduction op) override {
    check_cpu_contiguous(t, "all_reduce");
    // MPI counts are ints: a larger tensor goes in chunks.
    char* data = static_cast<char*>(t.data_ptr());
    const int64_t item = static_cast<int64_t>(dtype_size(t.dtype()));
    for (int64_t start = 0; start < t.numel(); start += kMaxCount) {
      const int64_t count = std::min(kMaxCount, t.numel() - start);
      MPI_Allreduce(MPI_IN_PLACE, data + start * item, static_cast<int>(count), mpi_type(t.dtype()),
                    mpi_op(op), MPI_COMM_WORLD);
    }
  }
  void all_reduce(std::vector<double>& values, Reduction op) override {
    MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE,
                  mpi_op(op), MPI_COMM_WORLD);
  }
  void broadcast(const Tensor& t, int64_t root) override {
    check_cpu_contiguous(t, "broadcast");
    char* data = static_cast<char*>(t.data_ptr());
    const int64_t bytes = static_cast<int64_t>(t.nbytes());
    for (int64_t start = 0; start < bytes; start += kMaxCount)
      MPI_Bcast(data + start, static_cast<int>(std::min(kMaxCount, bytes - start)), MPI_BYTE,
                static_cast<int>(root), MPI_COMM_WORLD);
  }
  std::vector<std::string> all_gather(const std::string& text) override {
    const int n = static_cast<int>(text.size());
    std::vector<int> sizes(size_), offsets(size_);
    MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, MPI_COMM_WORLD);
    int total = 0;
    for (int64_t r = 0; r < size_; ++r) {
      offsets[r] = total;
      total += sizes[r];
    }
    std::string all(total, '\0');
    MPI_Allgatherv(text.data(), n, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR,
                   MPI_COMM_WORLD);
    std::vector<std::string> out;
    for (int64_t r = 0; r < size_; ++r) out.push_back(all.substr(offsets[r], sizes[r]));
    return out;
  }
  // MPI leaves the reduced shard at the start of an in-place buffer: it moves to this rank's.
  void reduce_scatter(const Tensor& full, Reduction op) override {
    char* data = static_cast<char*>(full.data_ptr());
    const int count = shard_count(full, "reduce_scatter");
    MPI_Reduce_scatter_block(MPI_IN_PLACE, data, count, mpi_type(full.dtype()), mpi_op(op),
                             MPI_COMM_WORLD);
    const size_t bytes = static_cast<size_t>(count) * dtype_size(full.dtype());
    if (rank_ > 0) std::memcpy(data + static_cast<size_t>(rank_) * bytes, data, bytes);
  }
  void all_gather_shards(const Tensor& full) override {
    const int count = shard_count(full, "all_gather_shards");
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, full.data_ptr(), count,
                  mpi_type(full.dtype()), MPI_COMM_WORLD);
  }
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::exit(code);  // MPI_Abort does not return; should it, the process ends anyway
  }

 private:
  // The elements of one shard of a CPU tensor, within an MPI count (an int).
  int shard_count(const Tensor& full, const char* what) const {
    check_cpu_contiguous(full, what);
    const int64_t count = check_shards(full, std::string("mpi ") + what);
    if (count > kMaxCount)
      throw std::invalid_argument(std::string("[mpi] ") + what + " of shards of " +
                                  std::to_string(count) + " elements, over the " +
                                  std::to_string(kMaxCount) + " one call takes");
    return static_cast<int>(count);
  }

  int64_t rank_ = 0, size_ = 1, local_ = 0;
};

}  // namespace

}  // namespace sprig

extern "C" sprig::Communicator* sprig_make_mpi() { return new sprig::MpiCommunicator(); }

extern "C" void sprig_mpi_reference_all_reduce(float* data, int64_t count) {
  MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
