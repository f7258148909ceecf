// Learning-rate schedule (docs/semantics.md §10.3, E16): linear warmup then cosine decay to
// min_lr_ratio.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace sprig {

// Multiplier of the peak lr for optimizer step `step` (0-based):
//   (step + 1) / warmup                                  for step < warmup
//   m + (1 - m) * 0.5 * (1 + cos(pi * clamp((step - warmup) / max(1, total - warmup), 0, 1)))
inline double lr_multiplier(int64_t step, int64_t warmup, int64_t total, double min_lr_ratio) {
  if (step < warmup) return static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double progress = std::clamp(static_cast<double>(step - warmup) /
                                         static_cast<double>(std::max<int64_t>(1, total - warmup)),
                                     0.0, 1.0);
  return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

// warmup = max(1, int(ratio * total)) when given as a ratio (docs/semantics.md §10.3).
inline int64_t warmup_from_ratio(double ratio, int64_t total) {
  return std::max<int64_t>(1, static_cast<int64_t>(ratio * static_cast<double>(total)));
}

}  // namespace sprig
