// The progress of a training run: one console line and one metrics.jsonl record per logged step,
// and the figures they show (throughput, MFU against the device's peak, peak memory, ETA).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "tensor/dtype.h"

namespace sprig {

// Dense bf16 tensor-core peak of a GPU by its name (e.g. "NVIDIA H200": 989e12 FLOP/s), from a
// small table of data-centre GPUs; 0 when the name is not in it.
double peak_bf16_flops(const std::string& device_name);

// "4m05s", "1h02m05s".
std::string format_duration(double seconds);

// What one logged step reports.
struct StepRecord {
  int64_t step = 0, total_steps = 0;
  double loss = 0, lr = 0, grad_norm = 0;
  int64_t tokens = 0;       // supervised tokens trained on so far
  double tokens_per_s = 0;  // real (non-padding) tokens per second over the logging window
  double flops_per_s = 0;   // training FLOPs per second over the window
  int64_t skipped_steps = 0, epoch = 0;
  double eta_seconds = 0;
  std::vector<std::pair<std::string, double>> extra;  // recipe metrics, validation results
};

// The high-water mark of what sprig's allocator of `device` holds (bytes), and its reset: a run
// resets it as it starts training, so its progress lines report the run's peak.
void reset_memory_peak(Device device);
double memory_peak(Device device);

class ProgressLog {
 public:
  // Opens <run_dir>/metrics.jsonl for appending, keeping only the records of steps up to
  // `resumed_step` (a killed run may have logged steps after its last checkpoint).
  ProgressLog(const std::string& run_dir, int64_t resumed_step, Device device);

  // Prints the console line ("step 10/100 | loss ... | ETA ...", MFU on CUDA devices whose peak
  // is known, the memory peak) and appends the record.
  void log(const StepRecord& record);

 private:
  std::ofstream metrics_;
  Device device_;
  double peak_flops_ = 0;
};

}  // namespace sprig
