// DataLoader: the micro-batches of one split for one data-parallel rank. The split is read and
// packed once; each epoch visits the packed rows in a seeded shuffled order (seed + epoch),
// shared out across ranks like PyTorch's DistributedSampler (rank r takes every world-th row; the
// order is first extended by wrapping around so every rank gets ceil(rows / world) rows), in
// batches of micro_batch_size rows (the last one may be smaller). A background thread collates
// the next batches ahead of the step. A batch is a pure function of (epoch, batch index), so
// state() / restore() resume exactly.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/batch.h"
#include "data/config.h"

namespace sprig::data {

enum class Split { train, val };

// Where the loader stands: the batch next() returns next.
struct LoaderState {
  int64_t epoch = 0;
  int64_t batch = 0;  // index within the epoch
  bool operator==(const LoaderState&) const = default;
};

class DataLoader {
 public:
  // Reads and packs the split (throws std::invalid_argument on bad data), then starts prefetching
  // `prefetch` batches. The val split is never shuffled.
  DataLoader(const DataConfig& config, Split split = Split::train, int64_t rank = 0,
             int64_t world = 1, int64_t prefetch = 2);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  Batch next();  // epochs follow one another without end
  LoaderState state() const;
  void restore(const LoaderState& state);

  int64_t batches_per_epoch() const;
  std::vector<int64_t> epoch_rows(int64_t epoch) const;  // this rank's plan rows, in order
  const PackPlan& plan() const { return plan_; }
  const BadRecords& bad_records() const { return bad_; }
  std::string summary() const;  // packing statistics and skipped records

 private:
  LoaderState after(LoaderState at) const;
  Batch make_batch(LoaderState at, const std::vector<int64_t>& rows) const;
  void start(LoaderState from);
  void stop();
  void produce(LoaderState at);

  // Checked first, before the (possibly long) reading and packing.
  int64_t rank_, world_, micro_batch_size_, prefetch_, pad_id_;
  bool shuffle_;
  uint64_t seed_;
  BadRecords bad_;
  Corpus corpus_;
  PackPlan plan_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // queue, stop or error changed
  std::deque<Batch> queue_;
  LoaderState next_;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace sprig::data
