// DataLoader: per-epoch seeded order, rank sharding, background prefetch, exact resume.
#include "data/loader.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "tensor/random.h"

namespace sprig::data {

namespace {

const std::vector<std::string>& split_paths(const DataConfig& config, Split split) {
  if (split == Split::val && config.val.empty())
    throw std::invalid_argument("[data] no validation data: data.val is not set");
  return split == Split::train ? config.train : config.val;
}

int64_t checked_rank(int64_t rank, int64_t world) {
  if (world < 1 || rank < 0 || rank >= world)
    throw std::invalid_argument("[data] rank " + std::to_string(rank) + " is not in [0, " +
                                std::to_string(world) + ")");
  return rank;
}

int64_t positive(int64_t value, const char* name) {
  if (value < 1)
    throw std::invalid_argument(std::string("[data] ") + name + " must be positive, got " +
                                std::to_string(value));
  return value;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

DataLoader::DataLoader(const DataConfig& config, Split split, int64_t rank, int64_t world,
                       int64_t prefetch)
    : rank_(checked_rank(rank, world)),
      world_(world),
      micro_batch_size_(positive(config.micro_batch_size, "micro_batch_size")),
      prefetch_(positive(prefetch, "prefetch")),
      pad_id_(config.pad_id),
      shuffle_(config.shuffle && split == Split::train),
      seed_(config.seed),
      corpus_(load_corpus(split_paths(config, split), config.format, config.packing,
                          config.read_options(), bad_)),
      plan_(plan_rows(corpus_, config.pack_options())) {
  // Fewer rows than ranks would hand some ranks nothing but another rank's rows.
  if (static_cast<int64_t>(plan_.rows.size()) < world_)
    throw std::invalid_argument("[data] " + std::to_string(plan_.rows.size()) +
                                " packed rows cannot be shared by " + std::to_string(world_) +
                                " ranks: each needs a row of its own (more data or fewer ranks)");
  start({});
}

DataLoader::~DataLoader() { stop(); }

std::vector<int64_t> DataLoader::epoch_rows(int64_t epoch) const {
  const int64_t n = static_cast<int64_t>(plan_.rows.size());
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), int64_t{0});
  if (shuffle_) {  // Fisher-Yates with this epoch's generator
    Generator gen(seed_ + static_cast<uint64_t>(epoch));
    for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[gen.next_int(0, i + 1)]);
  }
  const int64_t per_rank = ceil_div(n, world_);
  std::vector<int64_t> rows(per_rank);
  for (int64_t k = 0; k < per_rank; ++k) rows[k] = order[(rank_ + k * world_) % n];
  return rows;
}

int64_t DataLoader::batches_per_epoch() const {
  return ceil_div(ceil_div(static_cast<int64_t>(plan_.rows.size()), world_), micro_batch_size_);
}

std::string DataLoader::summary() const {
  const std::string skipped = bad_.summary();
  return plan_.summary() + (skipped.empty() ? "" : "; " + skipped);
}

LoaderState DataLoader::after(LoaderState at) const {
  return at.batch + 1 < batches_per_epoch() ? LoaderState{at.epoch, at.batch + 1}
                                            : LoaderState{at.epoch + 1, 0};
}

Batch DataLoader::make_batch(LoaderState at, const std::vector<int64_t>& rows) const {
  const int64_t begin = at.batch * micro_batch_size_;
  const int64_t end = std::min<int64_t>(begin + micro_batch_size_, rows.size());
  return collate(corpus_, plan_, std::vector<int64_t>(rows.begin() + begin, rows.begin() + end),
                 pad_id_);
}

void DataLoader::produce(LoaderState at) {
  std::vector<int64_t> rows;
  int64_t rows_epoch = -1;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock,
                    [&] { return stopping_ || static_cast<int64_t>(queue_.size()) < prefetch_; });
      if (stopping_) return;
    }
    try {
      if (rows_epoch != at.epoch) {
        rows = epoch_rows(at.epoch);
        rows_epoch = at.epoch;
      }
      Batch batch = make_batch(at, rows);
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(batch));
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    changed_.notify_all();
    at = after(at);
  }
}

Batch DataLoader::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !queue_.empty() || error_; });
  if (queue_.empty()) std::rethrow_exception(error_);
  Batch batch = std::move(queue_.front());
  queue_.pop_front();
  next_ = after(next_);
  changed_.notify_all();
  return batch;
}

LoaderState DataLoader::state() const {
  std::lock_guard lock(mutex_);
  return next_;
}

void DataLoader::restore(const LoaderState& state) {
  if (state.epoch < 0 || state.batch < 0 || state.batch >= batches_per_epoch())
    throw std::invalid_argument("[data] cannot restore epoch " + std::to_string(state.epoch) +
                                " batch " + std::to_string(state.batch) + ": an epoch has " +
                                std::to_string(batches_per_epoch()) + " batches");
  stop();
  start(state);
}

void DataLoader::start(LoaderState from) {
  queue_.clear();
  error_ = nullptr;
  stopping_ = false;
  next_ = from;
  worker_ = std::thread([this, from] { produce(from); });
}

void DataLoader::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

}  // namespace sprig::data
