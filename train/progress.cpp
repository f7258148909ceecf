#include "train/progress.h"

#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "tensor/cuda/kernels.h"
#include "tensor/storage.h"

namespace sprig {

namespace fs = std::filesystem;

double peak_bf16_flops(const std::string& device_name) {
  // Dense (no sparsity) bf16 tensor-core peaks from the vendors' data sheets; the SXM parts.
  static const std::vector<std::pair<std::string, double>> peaks = {
      {"GH200", 989e12}, {"H200", 989e12}, {"H100", 989e12}, {"H800", 989e12}, {"B200", 2250e12},
      {"B100", 1750e12}, {"A100", 312e12}, {"A800", 312e12}, {"L40S", 362e12}};
  for (const auto& [name, peak] : peaks)
    if (device_name.find(name) != std::string::npos) return peak;
  return 0;
}

std::string format_duration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds);
  std::ostringstream os;
  if (s >= 3600) os << s / 3600 << "h";
  os << std::setw(s >= 3600 ? 2 : 1) << std::setfill('0') << (s % 3600) / 60 << "m" << std::setw(2)
     << s % 60 << "s";
  return os.str();
}

void reset_memory_peak(Device device) {
  if (device.is_cuda())
    cuda::reset_memory_peak(device.index);
  else
    reset_cpu_memory_peak();
}

double memory_peak(Device device) {
  return static_cast<double>(device.is_cuda() ? cuda::memory_peak(device.index)
                                              : cpu_memory_peak());
}

ProgressLog::ProgressLog(const std::string& run_dir, int64_t resumed_step, Device device)
    : device_(device),
      peak_flops_(device.is_cuda() ? peak_bf16_flops(cuda::device_name(device.index)) : 0) {
  const fs::path path = fs::path(run_dir) / "metrics.jsonl";
  std::vector<std::string> kept;
  if (resumed_step > 0 && fs::exists(path)) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
      const auto rec = nlohmann::json::parse(line, nullptr, false);
      if (!rec.is_discarded() && rec.value("step", int64_t{0}) <= resumed_step)
        kept.push_back(line);
    }
  }
  metrics_.open(path, std::ios::trunc);
  for (const std::string& line : kept) metrics_ << line << "\n";
  if (!metrics_) throw std::runtime_error(path.string() + ": cannot write");
}

void ProgressLog::log(const StepRecord& r) {
  const double peak_memory = memory_peak(device_);
  std::ostringstream line;
  line << "step " << r.step << "/" << r.total_steps << " | loss " << std::fixed
       << std::setprecision(4) << r.loss << " | lr " << std::scientific << std::setprecision(3)
       << r.lr << " | grad-norm " << std::fixed << std::setprecision(3) << r.grad_norm << " | "
       << std::setprecision(0) << r.tokens_per_s << " tok/s";
  if (peak_flops_ > 0)
    line << " | MFU " << std::setprecision(1) << 100.0 * r.flops_per_s / peak_flops_ << "%";
  for (const auto& [key, value] : r.extra)
    line << " | " << key << " " << std::setprecision(4) << value;
  line << " | peak " << std::setprecision(1) << peak_memory / (1 << 20) << " MiB | ETA "
       << format_duration(r.eta_seconds);
  std::cout << line.str() << std::endl;

  nlohmann::json rec = {{"step", r.step},
                        {"loss", r.loss},
                        {"lr", r.lr},
                        {"grad_norm", r.grad_norm},
                        {"tokens", r.tokens},
                        {"tokens_per_s", r.tokens_per_s},
                        {"skipped_steps", r.skipped_steps},
                        {"epoch", r.epoch},
                        {"peak_memory_bytes", peak_memory}};
  for (const auto& [key, value] : r.extra) rec[key] = value;
  metrics_ << rec.dump() << "\n" << std::flush;
}

}  // namespace sprig
