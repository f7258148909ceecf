// Which kernels run attention on a CUDA device (docs/kernels.md §9): sprig's flash kernels, which
// run every mask, or cuDNN's fused scaled-dot-product attention, which expresses only some. The
// rule lives here, in one place, and is host code (built and tested with or without CUDA):
//   - cuDNN expresses a batch mask when every row is one causal square over the whole row, or
//     packed causal documents that tile the row, optionally with one sliding window shared by
//     every rectangle (top-left aligned in each document);
//   - backend `sprig` always runs sprig's kernels; `cudnn` runs cuDNN and is an error (naming the
//     mask kind) where cuDNN cannot run the mask; `auto` runs, where cuDNN can, whichever of the
//     two measured faster on the call's shape (attention/cuda/twins.cpp), else sprig's.
// CPU attention ignores the backend.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attention/mask.h"

namespace sprig {

enum class AttentionBackend : uint8_t { automatic, sprig, cudnn };
const char* attention_backend_name(AttentionBackend backend);  // "auto", "sprig", "cudnn"
// Parses "auto" | "sprig" | "cudnn"; throws std::invalid_argument "[attention.backend] ...".
AttentionBackend parse_attention_backend(const std::string& name);

// The process-wide backend (default automatic): the trainers set it from the config's
// `attention.backend`, the benchmarks from --backend. Thread-safe.
void set_attention_backend(AttentionBackend backend);
AttentionBackend attention_backend();

// A batch mask as cuDNN's fused attention runs it.
struct CudnnMaskForm {
  // false: every row is one causal square (tensors as [B, H, T, D]); true: packed documents
  // (ragged sequences, one per document, in batch-row order).
  bool ragged = false;
  int64_t window = 0;             // 0: none
  std::vector<int32_t> seq_lens;  // ragged: the document lengths of rows 0..B-1, in order
};

// What a batch mask is, for cuDNN: its form when cuDNN can express it, and always a short name
// of its kind for messages ("causal", "packed causal documents", "... with a sliding window of
// 64", or why not: "prefix-tree or DFlash (it has full rectangles)", ...).
struct CudnnMaskClass {
  std::optional<CudnnMaskForm> form;
  std::string kind;
};
CudnnMaskClass classify_for_cudnn(const BatchMask& mask, int64_t batch);

// The lowest cuDNN versions (as cudnnGetVersion() gives them) sprig runs: every form needs
// 9.0.0; ragged documents and sliding windows need 9.6.0.
inline constexpr int kCudnnMinVersion = 90000;
inline constexpr int kCudnnRaggedMinVersion = 90600;

// The cuDNN form attention on a CUDA device may run `mask` in, or nullopt for sprig's kernels.
// `cudnn_version` is the loaded library's version (0: none, or a build without cuDNN); cuDNN runs
// bf16/f16 at head dims that are multiples of 8 up to 256, rows longer than one token, and not on
// 9.10.0 or 9.10.1 (whose backward is broken). Backend cudnn throws
// std::invalid_argument "[attention] backend cudnn ..." where cuDNN cannot run the call.
std::optional<CudnnMaskForm> cudnn_route(AttentionBackend backend, const BatchMask& mask,
                                         int64_t batch, int64_t head_dim, int cudnn_version);

}  // namespace sprig
