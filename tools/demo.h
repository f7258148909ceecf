// `sprig demo`: the whole training story with no downloads, in a few minutes on a laptop CPU.
//
// A synthetic language with real structure: numbers 0..63 as tokens, documents that are arithmetic
// progressions modulo 64 ("5 8 11 14 17 ..."). Stage 1 trains a tiny Qwen3 from scratch on such
// documents (packed with document-causal attention). Stage 2 fine-tunes it on shared-prefix
// rollouts: a prompt "<bos> 5 8 11 14 <sep>" and four completions, each opened by a mode token
// (up: 17 20 ..., down: 11 8 ..., double: 20 26 ..., repeat: 5 8 11 14 5 ...), folded into prefix
// trees and trained with prefix-tree attention. Greedy continuations of fresh prompts, before and
// after fine-tuning, show what was learnt. Stage 3 trains a DFlash speculative-decoding draft on
// the pre-trained model's hidden states and stage 4 a draft of every other kind
// (speculative/draft_kind.h) and an EAGLE-3 draft (speculative/eagle3.h), each reporting its
// acceptance length on held-out documents before and after; stage 5 decodes held-out prompts
// speculatively with each draft. The curves of every
// stage are drawn.
#pragma once

#include <string>

namespace sprig::tools {

struct DemoOptions {
  std::string run_dir = "runs/demo";
  std::string device = "auto";  // auto | cpu | cuda
  bool quick = false;           // fewer steps per stage, each still showing its effect
};

// Runs the stages into `run_dir` (data, configs, runs, curves). A run directory that holds
// anything but an earlier demo is refused; an earlier demo there is replaced.
void run_demo(const DemoOptions& options);

}  // namespace sprig::tools
