// The attention backend setting and the mask-to-backend rule (attention/backend.h).
#include "attention/backend.h"

#include <algorithm>
#include <atomic>
#include <string>

#include "tensor/ops/dispatch.h"

namespace sprig {

namespace {

std::atomic<AttentionBackend> g_backend{AttentionBackend::automatic};

std::string version_str(int v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

// The document lengths of one mask row when it is packed causal documents tiling the row with one
// shared window (`window` is set from the first rectangle), or why not.
std::optional<std::vector<int32_t>> row_documents(const Mask& m, int64_t& window,
                                                  std::string& why) {
  std::vector<Rect> rects;
  for (const Rect& r : m.rects)
    if (r.q0 < r.q1 && r.k0 < r.k1) rects.push_back(r);
  std::sort(rects.begin(), rects.end(), [](const Rect& a, const Rect& b) { return a.q0 < b.q0; });
  std::vector<int32_t> lens;
  int64_t next = 0;
  for (const Rect& r : rects) {
    if (r.kind == RectKind::full) {
      why = "prefix-tree or DFlash (it has full rectangles)";
      return std::nullopt;
    }
    if (r.q0 != r.k0 || r.q1 != r.k1 || r.band_shift != 0) {
      why = "causal rectangles off the diagonal";
      return std::nullopt;
    }
    if (r.q0 != next) {
      why = r.q0 < next ? "overlapping causal squares" : "rows with fully masked queries";
      return std::nullopt;
    }
    if (window < 0) window = r.window;
    if (r.window != window) {
      why = "causal squares with different sliding windows";
      return std::nullopt;
    }
    lens.push_back(static_cast<int32_t>(r.q1 - r.q0));
    next = r.q1;
  }
  if (next != m.q_len) {
    why = "rows with fully masked queries";
    return std::nullopt;
  }
  return lens;
}

}  // namespace

const char* attention_backend_name(AttentionBackend backend) {
  switch (backend) {
    case AttentionBackend::sprig: return "sprig";
    case AttentionBackend::cudnn: return "cudnn";
    default: return "auto";
  }
}

AttentionBackend parse_attention_backend(const std::string& name) {
  for (AttentionBackend b :
       {AttentionBackend::automatic, AttentionBackend::sprig, AttentionBackend::cudnn})
    if (name == attention_backend_name(b)) return b;
  detail::fail("attention.backend", "must be auto, sprig or cudnn, got '" + name + "'");
}

void set_attention_backend(AttentionBackend backend) { g_backend.store(backend); }
AttentionBackend attention_backend() { return g_backend.load(); }

CudnnMaskClass classify_for_cudnn(const BatchMask& mask, int64_t batch) {
  CudnnMaskClass c;
  if (mask.q_len() != mask.k_len()) {
    c.kind = "rectangular (queries " + std::to_string(mask.q_len()) + " != keys " +
             std::to_string(mask.k_len()) + ")";
    return c;
  }
  if (mask.q_len() == 0) {
    c.kind = "empty";
    return c;
  }
  CudnnMaskForm form;
  int64_t window = -1;
  bool one_per_row = true;
  for (int64_t b = 0; b < batch; ++b) {
    std::optional<std::vector<int32_t>> lens = row_documents(mask.row(b), window, c.kind);
    if (!lens) return c;
    one_per_row = one_per_row && lens->size() == 1;
    form.seq_lens.insert(form.seq_lens.end(), lens->begin(), lens->end());
  }
  form.ragged = !one_per_row;
  form.window = window;
  if (!form.ragged) form.seq_lens.clear();
  c.kind = form.ragged ? "packed causal documents" : "causal";
  if (form.window > 0) c.kind += " with a sliding window of " + std::to_string(form.window);
  c.form = std::move(form);
  return c;
}

std::optional<CudnnMaskForm> cudnn_route(AttentionBackend backend, const BatchMask& mask,
                                         int64_t batch, int64_t head_dim, int cudnn_version) {
  if (backend == AttentionBackend::sprig) return std::nullopt;
  const bool required = backend == AttentionBackend::cudnn;
  auto refuse = [&](const std::string& why) -> std::optional<CudnnMaskForm> {
    if (required) detail::fail("attention", "backend cudnn " + why);
    return std::nullopt;
  };
  if (cudnn_version == 0)
    return refuse(
        "is not available: this build has no cuDNN (use attention.backend: auto or "
        "sprig)");
  if (head_dim % 8 != 0 || head_dim > 256)
    return refuse("runs head dims that are multiples of 8 up to 256, got " +
                  std::to_string(head_dim));
  if (cudnn_version == 91000 || cudnn_version == 91001)
    return refuse("does not run on cuDNN " + version_str(cudnn_version) +
                  ", whose attention backward has known bugs (use 9.10.2 or newer)");
  if (mask.q_len() == 1)
    return refuse("cannot run rows of one token (cuDNN's backward refuses s_q = s_kv = 1)");
  CudnnMaskClass c = classify_for_cudnn(mask, batch);
  if (!c.form)
    return refuse("cannot express a " + c.kind +
                  " mask; it runs causal and packed-document masks (use attention.backend: auto "
                  "or sprig)");
  const bool needs_96 = c.form->ragged || c.form->window > 0;
  const int needed = needs_96 ? kCudnnRaggedMinVersion : kCudnnMinVersion;
  if (cudnn_version < needed)
    return refuse("needs cuDNN " + version_str(needed) + " for a " + c.kind + " mask, found " +
                  version_str(cudnn_version));
  return std::move(c.form);
}

}  // namespace sprig
