// Masks as rectangles: the per-row key span of a rectangle, the dense realisation, validation,
// and the builders of every layout (causal, documents, prefix trees, DFlash blocks).
#include "attention/mask.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <tuple>

#include "tensor/ops/dispatch.h"

namespace sprig {

using detail::fail;

const char* rect_kind_name(RectKind kind) { return kind == RectKind::causal ? "causal" : "full"; }

std::pair<int64_t, int64_t> Rect::key_span(int64_t q) const {
  int64_t lo = k0, hi = k1;
  if (kind == RectKind::causal) hi = std::min(hi, k0 + (q - q0) + 1);
  if (window > 0) lo = std::max(lo, k0 + band_shift + (q - q0) - window + 1);
  return {lo, hi};
}

bool Mask::allowed(int64_t q, int64_t k) const {
  for (const Rect& r : rects) {
    if (q < r.q0 || q >= r.q1) continue;
    const auto [lo, hi] = r.key_span(q);
    if (k >= lo && k < hi) return true;
  }
  return false;
}

Tensor Mask::dense() const {
  Tensor out = Tensor::zeros({q_len, k_len}, DType::boolean);
  bool* p = out.data<bool>();
  for (const Rect& r : rects)
    for (int64_t q = r.q0; q < r.q1; ++q) {
      const auto [lo, hi] = r.key_span(q);
      if (lo < hi) std::fill(p + q * k_len + lo, p + q * k_len + hi, true);
    }
  return out;
}

void Mask::validate() const {
  if (q_len < 0 || k_len < 0)
    fail("mask", "negative shape [" + std::to_string(q_len) + ", " + std::to_string(k_len) + "]");
  for (size_t i = 0; i < rects.size(); ++i) {
    const Rect& r = rects[i];
    const std::string name = "rectangle " + std::to_string(i) + " [" + std::to_string(r.q0) + ", " +
                             std::to_string(r.q1) + ") x [" + std::to_string(r.k0) + ", " +
                             std::to_string(r.k1) + ")";
    if (r.q0 < 0 || r.q0 > r.q1 || r.q1 > q_len || r.k0 < 0 || r.k0 > r.k1 || r.k1 > k_len)
      fail("mask", name + " is not inside the mask shape [" + std::to_string(q_len) + ", " +
                       std::to_string(k_len) + "]");
    if (r.window < 0) fail("mask", name + " has a negative window " + std::to_string(r.window));
  }
}

BatchMask::BatchMask(std::vector<Mask> rows) : rows_(std::move(rows)) {
  if (rows_.empty()) fail("mask", "a batch mask needs at least one mask");
  for (const Mask& m : rows_) {
    m.validate();
    if (m.q_len != q_len() || m.k_len != k_len())
      fail("mask", "batch rows have different shapes: [" + std::to_string(q_len()) + ", " +
                       std::to_string(k_len()) + "] and [" + std::to_string(m.q_len) + ", " +
                       std::to_string(m.k_len) + "]");
  }
}

// ---- builders -------------------------------------------------------------------------------

namespace {

void check_window(const char* op, int64_t window) {
  if (window < 0)
    fail(op, "sliding window must be >= 1 (or 0 for none), got " + std::to_string(window));
}

void check_lengths(const char* op, const char* name, const std::vector<int64_t>& lengths) {
  for (size_t i = 0; i < lengths.size(); ++i)
    if (lengths[i] < 0)
      fail(op, std::string(name) + "[" + std::to_string(i) + "] = " + std::to_string(lengths[i]) +
                   " is negative");
}

// a + b, failing when the sum does not fit in int64 (the operands are lengths, >= 0).
int64_t checked_add(const char* op, const char* what, int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum))
    fail(op, std::string(what) + " overflows int64 (" + std::to_string(a) + " + " +
                 std::to_string(b) + ")");
  return sum;
}

// The sum of non-negative lengths, failing when it does not fit in int64.
int64_t checked_sum(const char* op, const char* name, const std::vector<int64_t>& lengths) {
  int64_t sum = 0;
  for (int64_t len : lengths) sum = checked_add(op, (std::string(name) + " sum").c_str(), sum, len);
  return sum;
}

Rect causal_square(int64_t start, int64_t length, int64_t window) {
  return {start, start + length, start, start + length, RectKind::causal, window};
}

}  // namespace

Mask causal_mask(int64_t length, int64_t window) {
  if (length < 0) fail("causal_mask", "length must be >= 0, got " + std::to_string(length));
  check_window("causal_mask", window);
  return {length, length, {causal_square(0, length, window)}};
}

Mask document_mask(const std::vector<int64_t>& seq_lens, std::optional<int64_t> length,
                   int64_t window) {
  check_lengths("document_mask", "seq_lens", seq_lens);
  check_window("document_mask", window);
  const int64_t sum = checked_sum("document_mask", "seq_lens", seq_lens);
  const int64_t total = length.value_or(sum);
  if (sum > total)
    fail("document_mask",
         "seq_lens sum to " + std::to_string(sum) + ", more than length " + std::to_string(total));
  Mask m{total, total, {}};
  int64_t start = 0;
  for (int64_t len : seq_lens) {
    if (len == 0) continue;
    m.rects.push_back(causal_square(start, len, window));
    start += len;
  }
  if (start < total) {  // trailing padding joins the last document (or forms the only one)
    if (m.rects.empty())
      m.rects.push_back(causal_square(0, total, window));
    else
      m.rects.back() = causal_square(m.rects.back().q0, total - m.rects.back().q0, window);
  }
  return m;
}

Mask ttt_mask(const std::vector<int64_t>& seq_lens, int64_t length, int64_t step) {
  if (step < 0) fail("ttt_mask", "step must be >= 0, got " + std::to_string(step));
  Mask m = document_mask(seq_lens, length);
  m.k_len = (step + 1) * m.q_len;
  for (int64_t i = 1; i <= step; ++i)  // query q sees key i * length + q alone
    m.rects.push_back(Rect{0, m.q_len, i * m.q_len, (i + 1) * m.q_len, RectKind::causal, 1, 0});
  return m;
}

namespace {

// Sample paths must describe one tree, root first: each path starts at node 0 (at any node when
// node 0 is empty: an empty prompt leaves independent completions) and goes down by increasing
// node index, every node has the same parent on every path through it, and every non-empty node
// lies on some path. Anything else would let a token see a later one, or leave tokens unmasked.
void check_tree_paths(const std::vector<int64_t>& node_lengths,
                      const std::vector<std::vector<int64_t>>& paths) {
  const char* op = "prefix_tree_mask";
  const int64_t num_nodes = static_cast<int64_t>(node_lengths.size());
  std::vector<int64_t> parent(num_nodes, -2);  // -2: on no path yet; a root's parent is -1
  for (size_t p = 0; p < paths.size(); ++p) {
    const std::string name = "sample_paths[" + std::to_string(p) + "]";
    if (paths[p].empty()) fail(op, name + " is empty");
    for (size_t pos = 0; pos < paths[p].size(); ++pos) {
      const int64_t u = paths[p][pos], up = pos ? paths[p][pos - 1] : -1;
      const std::string at = name + "[" + std::to_string(pos) + "] = " + std::to_string(u);
      if (u < 0 || u >= num_nodes)
        fail(op, at + " is not a node index in [0, " + std::to_string(num_nodes) + ")");
      if (pos == 0 && u != 0 && node_lengths[0] > 0)
        fail(op, name + " starts at node " + std::to_string(u) + ", not at the root 0");
      if (pos > 0 && u <= up)
        fail(op, at + " does not come after its parent " + std::to_string(up) +
                     ": node indices increase along a path");
      if (parent[u] != -2 && parent[u] != up)
        fail(op, at + " has parent " + std::to_string(up) + " here but " +
                     std::to_string(parent[u]) + " on an earlier path");
      parent[u] = up;
    }
  }
  for (int64_t u = 0; u < num_nodes; ++u)
    if (parent[u] == -2 && node_lengths[u] > 0)
      fail(op, "node " + std::to_string(u) + " lies on no sample path");
}

}  // namespace

Mask prefix_tree_mask(const std::vector<int64_t>& node_lengths,
                      const std::vector<std::vector<int64_t>>& sample_paths) {
  check_lengths("prefix_tree_mask", "node_lengths", node_lengths);
  std::vector<int64_t> offset(node_lengths.size() + 1, 0);
  for (size_t u = 0; u < node_lengths.size(); ++u)
    offset[u + 1] = checked_add("prefix_tree_mask", "node_lengths sum", offset[u], node_lengths[u]);
  Mask m{offset.back(), offset.back(), {}};
  check_tree_paths(node_lengths, sample_paths);
  std::set<std::tuple<int64_t, int64_t, int64_t, int64_t, RectKind>> emitted;
  auto emit = [&](int64_t u, int64_t a, RectKind kind) {
    const Rect r{offset[u], offset[u + 1], offset[a], offset[a + 1], kind};
    if (emitted.insert({r.q0, r.q1, r.k0, r.k1, kind}).second) m.rects.push_back(r);
  };
  for (size_t p = 0; p < sample_paths.size(); ++p) {
    const std::vector<int64_t>& path = sample_paths[p];
    for (size_t pos = 0; pos < path.size(); ++pos) {
      const int64_t u = path[pos];
      emit(u, u, RectKind::causal);
      for (size_t anc = 0; anc < pos; ++anc) emit(u, path[anc], RectKind::full);
    }
  }
  return m;
}

Mask block_diagonal(const std::vector<Mask>& parts) {
  Mask m;
  for (const Mask& part : parts) {
    for (Rect r : part.rects) {
      r.q0 += m.q_len, r.q1 += m.q_len;
      r.k0 += m.k_len, r.k1 += m.k_len;
      m.rects.push_back(r);
    }
    m.q_len += part.q_len;
    m.k_len += part.k_len;
  }
  return m;
}

namespace {

void check_dflash_spec(const DFlashMaskSpec& s) {
  const char* op = "dflash_mask";
  if (s.ctx_len < 0) fail(op, "ctx_len must be >= 0, got " + std::to_string(s.ctx_len));
  if (s.block_size < 1) fail(op, "block_size must be >= 1, got " + std::to_string(s.block_size));
  check_window(op, s.sliding_window);
  if (s.keep.size() != s.anchors.size())
    fail(op, "keep has " + std::to_string(s.keep.size()) + " entries for " +
                 std::to_string(s.anchors.size()) + " anchors");
  const int64_t max_anchor = std::max<int64_t>(s.ctx_len - s.block_size, 0);
  for (size_t j = 0; j < s.anchors.size(); ++j)
    if (s.anchors[j] < 0 || s.anchors[j] > max_anchor)
      fail(op, "anchors[" + std::to_string(j) + "] = " + std::to_string(s.anchors[j]) +
                   " is outside [0, max(ctx_len - block_size, 0)] = [0, " +
                   std::to_string(max_anchor) + "]");
  const int64_t slots = static_cast<int64_t>(s.anchors.size());
  if (slots > 0 && s.block_size > (std::numeric_limits<int64_t>::max() - s.ctx_len) / slots)
    fail(op, std::to_string(slots) + " blocks of " + std::to_string(s.block_size) +
                 " slots after a context of " + std::to_string(s.ctx_len) + " overflow int64");
  check_lengths(op, "seq_lens", s.seq_lens);
  const int64_t sum = checked_sum(op, "seq_lens", s.seq_lens);
  if (!s.seq_lens.empty() && sum != s.ctx_len)
    fail(op, "seq_lens sum to " + std::to_string(sum) + ", expected ctx_len " +
                 std::to_string(s.ctx_len));
}

// First context position of the document holding `pos`: with ctx_doc_id[t] = #{j : cumsum[j] <= t}
// (docs/semantics.md §4.8), that is the largest cumulative length <= pos (zero-length entries never
// split).
int64_t document_start(const std::vector<int64_t>& seq_lens, int64_t pos) {
  int64_t start = 0, end = 0;
  for (int64_t len : seq_lens) {
    end += len;
    if (end <= pos) start = end;
  }
  return start;
}

}  // namespace

Mask dflash_mask(const DFlashMaskSpec& s) {
  check_dflash_spec(s);
  const int64_t num_slots = static_cast<int64_t>(s.anchors.size()) * s.block_size;
  Mask m{num_slots, s.ctx_len + num_slots, {}};
  const RectKind own_kind = s.causal ? RectKind::causal : RectKind::full;
  for (size_t j = 0; j < s.anchors.size(); ++j) {
    const int64_t q0 = static_cast<int64_t>(j) * s.block_size, q1 = q0 + s.block_size;
    const int64_t a = s.anchors[j];
    const int64_t lo = s.seq_lens.empty() ? 0 : document_start(s.seq_lens, a);
    if (s.keep[j] && lo < a)  // context: [lo, a), slot i sits at position a + i for the window
      m.rects.push_back({q0, q1, lo, a, RectKind::full, s.sliding_window, a - lo});
    m.rects.push_back({q0, q1, s.ctx_len + q0, s.ctx_len + q1, own_kind});
  }
  return m;
}

}  // namespace sprig
