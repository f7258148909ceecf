// The model shapes the training-step benchmarks run: "tiny", the CPU yardstick (H=256, 4 layers,
// 4/2 heads of 64, I=768, V=4096, untied: 5.25M parameters; docs/architecture.md §9), "wide"
// (tiny's depth at a real model's width, H=1024, 8/4 heads of 128, I=3072, V=32768: where the
// LM head's GEMMs outweigh the per-logit work as they do at scale), and "qwen3-0.6b" (tied), or
// any config.json path.
#pragma once

#include <string>

#include "nn/qwen_config.h"

namespace sprig::bench {

QwenConfig model_config(const std::string& name);

}  // namespace sprig::bench
