// The memory check every benchmark makes before it allocates or prints: the bytes its shapes take,
// estimated by the benchmark, against what the device can hold (train/memory.h: usable_memory), so
// an absurd size is refused with its figures instead of ending in std::bad_alloc.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "train/memory.h"

namespace sprig::bench {

// Throws std::runtime_error "[bench data] --tokens 1000000000000 --seq-len 4096 --batch 8 would
// take 26077.1 GiB, more than the 22.9 GiB available on cpu" (`where`, then `sizes`: the options
// and shapes the estimate comes from) when `bytes` exceed usable_memory(device). A runtime error
// (exit 1), as the other memory checks: the values are valid, the machine cannot hold them.
inline void check_fits(const std::string& where, const std::string& sizes, double bytes,
                       Device device) {
  const double usable = usable_memory(device), gib = 1024.0 * 1024.0 * 1024.0;
  if (bytes <= usable) return;
  char figures[512];
  std::snprintf(figures, sizeof figures, " would take %.1f GiB, more than the %.1f GiB",
                bytes / gib, usable / gib);
  throw std::runtime_error("[" + where + "] " + sizes + figures + " available on " + device.str());
}

// A count of train/memory.h's StepShapes computed in double: a product of large options saturates
// at 1e18 (far beyond any machine) instead of overflowing int64.
inline int64_t shape_count(double count) { return static_cast<int64_t>(std::min(count, 1e18)); }

// The parameters of a model's parts (QwenConfig::parameter_parts), for StepShapes.
inline int64_t parameter_count(const std::vector<ParameterPart>& parts) {
  double count = 0;
  for (const ParameterPart& part : parts) count += part.count;
  return shape_count(count);
}

}  // namespace sprig::bench
