// The NCCL backend of train/communicator.h, built as the plugin libsprig_nccl.so (which links
// NCCL; sprig loads it only for a CUDA run of several ranks): CUDA tensors reduced by NCCL on a
// stream of its own, host values and CPU tensors over the MPI communicator it wraps (which also
// carries the ncclUniqueId from rank 0 to the others).
//
// Stream order: a collective on the communication stream first waits for an event recorded on
// the compute stream (its input is final there); all_reduce and broadcast then make the compute
// stream wait for the collective's completion event, so later kernels see the result without the
// host ever blocking. start_sum leaves that wait to finish_sums, so several bucket sums run while
// backward goes on computing.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tensor/cuda/kernels.h"
#include "train/communicator.h"

namespace sprig {

namespace {

void check(ncclResult_t result, const char* what) {
  if (result != ncclSuccess)
    throw std::runtime_error(std::string("[nccl] ") + what + ": " + ncclGetErrorString(result));
}

void check(cudaError_t result, const char* what) {
  if (result != cudaSuccess)
    throw std::runtime_error(std::string("[nccl] ") + what + ": " + cudaGetErrorString(result));
}

ncclRedOp_t nccl_op(Reduction op) {
  return op == Reduction::sum ? ncclSum : op == Reduction::min ? ncclMin : ncclMax;
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::bf16: return ncclBfloat16;
    case DType::f16: return ncclFloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    default:
      throw std::invalid_argument(std::string("[nccl] cannot reduce ") + dtype_name(dtype) +
                                  " tensors");
  }
}

class NcclCommunicator : public Communicator {
 public:
  explicit NcclCommunicator(std::unique_ptr<Communicator> mpi) : mpi_(std::move(mpi)) {
    int devices = 0;
    check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    device_ = device_for_local_rank(mpi_->local_rank(), devices);
    check(cudaSetDevice(device_), "cudaSetDevice");
    ncclUniqueId id;
    std::string bytes;
    if (mpi_->rank() == 0) {
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      bytes.assign(reinterpret_cast<const char*>(&id), sizeof id);
    }
    bytes = mpi_->all_gather(bytes)[0];
    std::memcpy(&id, bytes.data(), sizeof id);
    check(ncclCommInitRank(&comm_, static_cast<int>(mpi_->world_size()), id,
                           static_cast<int>(mpi_->rank())),
          "ncclCommInitRank");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreateWithFlags(&inputs_ready_, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreate");
  }
  // The communicator goes first, once its stream's work is done; then the stream and events.
  ~NcclCommunicator() override {
    cudaStreamSynchronize(stream_);
    ncclCommDestroy(comm_);
    cudaEventDestroy(done_);
    cudaEventDestroy(inputs_ready_);
    cudaStreamDestroy(stream_);
  }

  int64_t rank() const override { return mpi_->rank(); }
  int64_t world_size() const override { return mpi_->world_size(); }
  int64_t local_rank() const override { return mpi_->local_rank(); }
  std::string backend() const override { return "NCCL"; }

  void all_reduce(const Tensor& t, Reduction op) override {
    if (t.device().is_cpu()) return mpi_->all_reduce(t, op);
    launch_all_reduce(t, op);
    compute_waits();
  }
  void all_reduce(std::vector<double>& values, Reduction op) override {
    mpi_->all_reduce(values, op);
  }
  void broadcast(const Tensor& t, int64_t root) override {
    if (t.device().is_cpu()) return mpi_->broadcast(t, root);
    after_compute(t);
    check(ncclBroadcast(t.data_ptr(), t.data_ptr(), t.nbytes(), ncclUint8, static_cast<int>(root),
                        comm_, stream_),
          "ncclBroadcast");
    compute_waits();
  }
  std::vector<std::string> all_gather(const std::string& text) override {
    return mpi_->all_gather(text);
  }
  // In place: NCCL takes this rank's shard of `full` as the reduce-scatter's output and the
  // all-gather's input.
  void reduce_scatter(const Tensor& full, Reduction op) override {
    if (full.device().is_cpu()) return mpi_->reduce_scatter(full, op);
    after_compute(full);
    const auto [count, base, mine] = shards(full);
    check(
        ncclReduceScatter(base, mine, count, nccl_type(full.dtype()), nccl_op(op), comm_, stream_),
        "ncclReduceScatter");
    compute_waits();
  }
  void all_gather_shards(const Tensor& full) override {
    if (full.device().is_cpu()) return mpi_->all_gather_shards(full);
    after_compute(full);
    const auto [count, base, mine] = shards(full);
    check(ncclAllGather(mine, base, count, nccl_type(full.dtype()), comm_, stream_),
          "ncclAllGather");
    compute_waits();
  }
  void barrier() override {
    check(cudaStreamSynchronize(cuda::current_stream(device_)), "synchronise before a barrier");
    check(cudaStreamSynchronize(stream_), "synchronise before a barrier");
    mpi_->barrier();
  }

  bool overlaps_backward() const override { return true; }
  void start_sum(const Tensor& t) override { launch_all_reduce(t, Reduction::sum); }
  void finish_sums() override { compute_waits(); }
  // NCCL's abort first: collectives in flight on this rank end instead of waiting for the others.
  [[noreturn]] void abort(int code) override {
    ncclCommAbort(comm_);
    mpi_->abort(code);
    std::abort();  // not reached: [[noreturn]] does not carry through a virtual call
  }

 private:
  void after_compute(const Tensor& t) {
    if (!t.is_contiguous() || t.device().index != device_)
      throw std::invalid_argument("[nccl] collectives need a contiguous tensor on cuda:" +
                                  std::to_string(device_) + ", got one on " + t.device().str());
    check(cudaEventRecord(inputs_ready_, cuda::current_stream(device_)), "cudaEventRecord");
    check(cudaStreamWaitEvent(stream_, inputs_ready_, 0), "cudaStreamWaitEvent");
  }
  void launch_all_reduce(const Tensor& t, Reduction op) {
    after_compute(t);
    check(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()),
                        nccl_type(t.dtype()), nccl_op(op), comm_, stream_),
          "ncclAllReduce");
  }
  // A shard's elements, the tensor's first byte and this rank's shard's.
  struct Shards {
    size_t count;
    char *base, *mine;
  };
  Shards shards(const Tensor& full) const {
    const auto count = static_cast<size_t>(check_shards(full, "nccl"));
    char* base = static_cast<char*>(full.data_ptr());
    return {count, base, base + static_cast<size_t>(rank()) * count * dtype_size(full.dtype())};
  }
  void compute_waits() {
    check(cudaEventRecord(done_, stream_), "cudaEventRecord");
    check(cudaStreamWaitEvent(cuda::current_stream(device_), done_, 0), "cudaStreamWaitEvent");
  }

  std::unique_ptr<Communicator> mpi_;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t inputs_ready_ = nullptr, done_ = nullptr;
};

}  // namespace

}  // namespace sprig

extern "C" sprig::Communicator* sprig_make_nccl(sprig::Communicator* mpi) {
  return new sprig::NcclCommunicator(std::unique_ptr<sprig::Communicator>(mpi));
}
