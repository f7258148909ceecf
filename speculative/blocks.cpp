#include "speculative/blocks.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "attention/mask.h"

namespace sprig::speculative {

namespace {

[[noreturn]] void fail(const char* where, const std::string& message) {
  throw std::invalid_argument(std::string("[") + where + "] " + message);
}

std::vector<int64_t> host(const Tensor& t) { return t.to_vector<int64_t>(); }

// The last position an anchor may take: a block must start where all its slots fit the row.
int64_t max_anchor(int64_t seq_len, int64_t block_size) {
  return std::max<int64_t>(seq_len - block_size, 0);
}

void check_block_size(const char* where, int64_t block_size) {
  if (block_size < kMinBlockSize)
    fail(where, "block_size must be >= " + std::to_string(kMinBlockSize) + ", got " +
                    std::to_string(block_size));
}

}  // namespace

void DraftRows::check() const {
  if (input_ids.dim() != 2)
    fail("draft", "input_ids must be (B, S), got " + shape_str(input_ids.shape()));
  if (loss_mask.shape() != input_ids.shape())
    fail("draft", "loss_mask " + shape_str(loss_mask.shape()) + " must have input_ids' shape " +
                      shape_str(input_ids.shape()));
  const bool any = position_ids.defined() || doc_remaining.defined() || !doc_lens.empty();
  const bool all = position_ids.defined() && doc_remaining.defined() && !doc_lens.empty();
  if (any && !all)
    fail("draft", "packed rows need position_ids, doc_remaining and the document lengths together");
  if (!all) return;
  if (position_ids.shape() != input_ids.shape() || doc_remaining.shape() != input_ids.shape())
    fail("draft", "position_ids and doc_remaining must have input_ids' shape " +
                      shape_str(input_ids.shape()));
  if (static_cast<int64_t>(doc_lens.size()) != rows())
    fail("draft", std::to_string(doc_lens.size()) + " rows of document lengths for " +
                      std::to_string(rows()) + " rows");
  for (size_t b = 0; b < doc_lens.size(); ++b) {
    const int64_t sum = std::accumulate(doc_lens[b].begin(), doc_lens[b].end(), int64_t{0});
    if (sum != seq_len())
      fail("draft", "the documents of row " + std::to_string(b) + " sum to " + std::to_string(sum) +
                        ", not the row length " + std::to_string(seq_len()));
  }
}

Anchors sample_anchors(const DraftRows& rows, int64_t block_size, int64_t num_anchors,
                       Generator& gen) {
  rows.check();
  check_block_size("anchors", block_size);
  if (num_anchors < 1)
    fail("anchors", "num_anchors must be >= 1, got " + std::to_string(num_anchors));
  const int64_t B = rows.rows(), S = rows.seq_len(), last = max_anchor(S, block_size);
  const std::vector<int64_t> lm = host(rows.loss_mask);
  const std::vector<int64_t> rem =
      rows.packed() ? host(rows.doc_remaining) : std::vector<int64_t>();
  std::vector<std::vector<int64_t>> valid(static_cast<size_t>(B));
  size_t most = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t <= last && t < S; ++t) {
      const int64_t i = b * S + t;
      if (lm[i] > 0 && (!rows.packed() || rem[i] >= block_size - 1)) valid[b].push_back(t);
    }
    most = std::max(most, valid[b].size());
  }
  const int64_t N = std::min<int64_t>(num_anchors, static_cast<int64_t>(most));
  if (N <= 0)
    throw NoValidAnchors(
        "[anchors] no valid anchor: no row has a supervised token at a position "
        "in [0, " +
        std::to_string(last) + "] with block_size=" + std::to_string(block_size) +
        (rows.packed() ? " whose block stays inside its document" : ""));
  std::vector<int64_t> anchors(static_cast<size_t>(B * N), 0);
  std::vector<bool> keep(static_cast<size_t>(B * N), false);
  for (int64_t b = 0; b < B; ++b) {
    // A uniform random subset: the positions with the smallest of one uniform draw each.
    std::vector<std::pair<double, int64_t>> draws;
    for (int64_t t : valid[b]) draws.emplace_back(gen.next_uniform(), t);
    std::sort(draws.begin(), draws.end());
    const auto kept = std::min<size_t>(draws.size(), static_cast<size_t>(N));
    std::vector<int64_t> chosen;
    for (size_t j = 0; j < kept; ++j) chosen.push_back(draws[j].second);
    std::sort(chosen.begin(), chosen.end());
    for (size_t j = 0; j < kept; ++j) {
      anchors[b * N + j] = chosen[j];
      keep[b * N + j] = true;
    }
  }
  return {Tensor::from_vector(anchors, {B, N}), Tensor::from_vector(keep, {B, N})};
}

void check_anchors(const DraftRows& rows, const Anchors& a, int64_t block_size) {
  check_block_size("anchors", block_size);
  if (a.anchors.dim() != 2 || a.anchors.size(0) != rows.rows())
    fail("anchors", "anchors must be (" + std::to_string(rows.rows()) + ", N), got " +
                        shape_str(a.anchors.shape()));
  if (a.keep.shape() != a.anchors.shape())
    fail("anchors", "keep " + shape_str(a.keep.shape()) + " must have the anchors' shape " +
                        shape_str(a.anchors.shape()));
  const int64_t N = a.blocks(), last = max_anchor(rows.seq_len(), block_size);
  const std::vector<int64_t> anchors = host(a.anchors);
  const std::vector<bool> keep = a.keep.to_vector<bool>();
  for (int64_t b = 0; b < rows.rows(); ++b)
    for (int64_t j = 0; j < N; ++j) {
      const int64_t at = anchors[b * N + j];
      const std::string where = "row " + std::to_string(b) + " block " + std::to_string(j);
      if (at < 0 || at > last)
        fail("anchors", where + ": anchor " + std::to_string(at) + " is outside [0, " +
                            std::to_string(last) + "] (block_size " + std::to_string(block_size) +
                            ", " + std::to_string(rows.seq_len()) + " tokens)");
      if (j == 0) continue;
      if (keep[b * N + j] && !keep[b * N + j - 1])
        fail("anchors", where + " is kept after a dropped block (kept blocks come first)");
      if (keep[b * N + j] && at < anchors[b * N + j - 1])
        fail("anchors", where + ": anchor " + std::to_string(at) + " comes before the previous " +
                            std::to_string(anchors[b * N + j - 1]) + " (anchors ascend)");
    }
}

Blocks make_blocks(const DraftRows& rows, const Anchors& a, const BlockOptions& o,
                   const Tensor& prefix_lengths) {
  rows.check();
  check_anchors(rows, a, o.block_size);
  const int64_t B = rows.rows(), S = rows.seq_len(), N = a.blocks(), bs = o.block_size, Q = N * bs;
  if (prefix_lengths.defined() && prefix_lengths.shape() != a.anchors.shape())
    fail("blocks", "prefix_lengths " + shape_str(prefix_lengths.shape()) +
                       " must have the anchors' shape " + shape_str(a.anchors.shape()));
  const std::vector<int64_t> ids = host(rows.input_ids), lm = host(rows.loss_mask);
  const std::vector<int64_t> pos = rows.packed() ? host(rows.position_ids) : std::vector<int64_t>();
  const std::vector<int64_t> rem =
      rows.packed() ? host(rows.doc_remaining) : std::vector<int64_t>();
  const std::vector<int64_t> anchors = host(a.anchors);
  const std::vector<bool> keep = a.keep.to_vector<bool>();
  const std::vector<int64_t> prefix =
      prefix_lengths.defined() ? host(prefix_lengths) : std::vector<int64_t>();

  std::vector<int64_t> noise(static_cast<size_t>(B * Q), o.mask_token_id);
  std::vector<int64_t> positions(static_cast<size_t>(B * (S + Q)));
  std::vector<int64_t> targets(static_cast<size_t>(B * Q));
  std::vector<float> block_mask(static_cast<size_t>(B * Q));
  std::vector<Mask> masks;
  for (int64_t b = 0; b < B; ++b) {
    const auto token = [&](int64_t t) { return ids[b * S + t]; };
    int64_t* row_pos = &positions[b * (S + Q)];
    for (int64_t t = 0; t < S; ++t) row_pos[t] = rows.packed() ? pos[b * S + t] : t;
    DFlashMaskSpec spec;
    spec.ctx_len = S;
    spec.block_size = bs;
    spec.causal = o.causal;
    spec.sliding_window = o.sliding_window;
    if (rows.packed())
      for (int64_t len : rows.doc_lens[b])
        if (len > 0) spec.seq_lens.push_back(len);
    for (int64_t j = 0; j < N; ++j) {
      const int64_t at = anchors[b * N + j], q0 = b * Q + j * bs;
      const bool kept = keep[b * N + j];
      spec.anchors.push_back(at);
      spec.keep.push_back(kept);
      if (kept && prefix.empty()) noise[q0] = token(at);
      for (int64_t k = 0; k < bs; ++k) {
        if (kept && !prefix.empty() && k < prefix[b * N + j] && at + k < S)
          noise[q0 + k] = token(at + k);
        row_pos[S + j * bs + k] = row_pos[at] + k;  // the anchor's phase, document-local
        const int64_t label = at + o.label_start + k, safe = std::min(label, S - 1);
        const bool in_range = label < S && (!o.labels_within_document || !rows.packed() ||
                                            o.label_start + k <= rem[b * S + at]);
        targets[q0 + k] = token(safe);
        block_mask[q0 + k] = kept && in_range && lm[b * S + safe] > 0 ? 1.0f : 0.0f;
      }
    }
    masks.push_back(dflash_mask(spec));
  }
  Blocks out;
  out.block_size = bs;
  out.noise_ids = Tensor::from_vector(noise, {B, Q});
  out.positions = Tensor::from_vector(positions, {B, S + Q});
  out.mask = compile_attention_mask(BatchMask(masks));
  out.target_ids = Tensor::from_vector(targets, {B, N, bs});
  out.block_mask = Tensor::from_vector(block_mask, {B, N, bs});
  return out;
}

Tensor sample_prefix_lengths(int64_t rows, int64_t blocks, int64_t block_size, double base,
                             Generator& gen) {
  check_block_size("prefix_lengths", block_size);
  if (!(base > 0)) fail("prefix_lengths", "prefix_weight_base must be positive");
  const int64_t lo = std::min<int64_t>(2, block_size - 1), hi = block_size - 1;
  std::vector<int64_t> out(static_cast<size_t>(rows * blocks), lo);
  if (hi > lo) {
    std::vector<double> cumulative;  // of base^l for l = lo..hi
    double total = 0;
    for (int64_t l = lo; l <= hi; ++l) cumulative.push_back(total += std::pow(base, l));
    for (int64_t& l : out) {
      const double u = gen.next_uniform() * total;
      l = lo + static_cast<int64_t>(std::upper_bound(cumulative.begin(), cumulative.end(), u) -
                                    cumulative.begin());
      l = std::min(l, hi);
    }
  }
  return Tensor::from_vector(out, {rows, blocks});
}

}  // namespace sprig::speculative
