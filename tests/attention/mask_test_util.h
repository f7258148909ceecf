// Helpers of the attention tests: dense masks as strings of 0/1 rows, independent predicates that
// restate docs/semantics.md §2.5 / §2.7 literally, and random masks of every kind for a given
// length.
#pragma once

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/mask.h"

namespace sprig::testing {

// Rows of the dense mask as "0110..." strings; with split > 0 a '|' separates keys [0, split)
// from the rest (docs/semantics.md §12 writes DFlash masks as "context|slots").
inline std::vector<std::string> dense_rows(const Mask& m, int64_t split = 0) {
  const std::vector<int32_t> d = m.dense().to_vector<int32_t>();
  std::vector<std::string> rows;
  for (int64_t q = 0; q < m.q_len; ++q) {
    std::string row;
    for (int64_t k = 0; k < m.k_len; ++k) {
      if (split > 0 && k == split) row += '|';
      row += d[q * m.k_len + k] ? '1' : '0';
    }
    rows.push_back(row);
  }
  return rows;
}

// ctx_doc_id[t] = #{j : cumsum(seq_lens)[j] <= t} (docs/semantics.md §4.8).
inline int64_t doc_id(const std::vector<int64_t>& seq_lens, int64_t t) {
  int64_t id = 0, end = 0;
  for (int64_t len : seq_lens) id += (end += len) <= t;
  return id;
}

// The predicate of docs/semantics.md §2.7, transcribed literally.
inline bool dflash_allowed(const DFlashMaskSpec& s, int64_t q, int64_t kv) {
  const int64_t j = q / s.block_size, i = q % s.block_size, a = s.anchors[j], S = s.ctx_len;
  const bool ctx_vis = kv < S && kv < a &&
                       (s.sliding_window == 0 || (a + i) - kv < s.sliding_window) &&
                       (s.seq_lens.empty() || doc_id(s.seq_lens, kv) == doc_id(s.seq_lens, a));
  const bool noise_vis =
      kv >= S && (kv - S) / s.block_size == j && (!s.causal || (kv - S) % s.block_size <= i);
  return (ctx_vis && s.keep[j]) || noise_vis;
}

// docs/semantics.md §2.5 in words: a token attends causally to its own node and fully to every node
// before its node on a path that holds its node.
inline bool prefix_tree_allowed(const std::vector<int64_t>& node_lengths,
                                const std::vector<std::vector<int64_t>>& paths, int64_t q,
                                int64_t k) {
  auto node_of = [&](int64_t t) {
    int64_t n = 0;
    while (t >= node_lengths[n]) t -= node_lengths[n++];
    return n;
  };
  const int64_t nq = node_of(q), nk = node_of(k);
  if (nq == nk) return k <= q;
  for (const auto& path : paths) {
    const auto at = std::find(path.begin(), path.end(), nq);
    if (at != path.end() && std::find(path.begin(), at, nk) != at) return true;
  }
  return false;
}

// Random split of `total` into `parts` lengths; without zeros every length is >= 1 (and there
// are at most `total` parts).
inline std::vector<int64_t> random_lengths(int64_t total, int64_t parts, bool zeros,
                                           std::mt19937& rng) {
  std::vector<int64_t> cuts;
  if (zeros) {
    for (int64_t i = 1; i < parts; ++i)
      cuts.push_back(std::uniform_int_distribution<int64_t>(0, total)(rng));
  } else {
    std::vector<int64_t> inner(std::max<int64_t>(total - 1, 0));
    std::iota(inner.begin(), inner.end(), 1);
    std::shuffle(inner.begin(), inner.end(), rng);
    inner.resize(std::min<size_t>(inner.size(), static_cast<size_t>(parts - 1)));
    cuts = inner;
  }
  cuts.push_back(0);
  cuts.push_back(total);
  std::sort(cuts.begin(), cuts.end());
  std::vector<int64_t> lens;
  for (size_t i = 1; i < cuts.size(); ++i) lens.push_back(cuts[i] - cuts[i - 1]);
  return lens;
}

struct RandomTree {
  std::vector<int64_t> node_lengths;
  std::vector<std::vector<int64_t>> paths;
};

// A random tree of `total` tokens: node 0 is the root, every other node hangs under an earlier
// one; one path per leaf (root to leaf), as the fold emits them.
inline RandomTree random_tree(int64_t total, std::mt19937& rng) {
  RandomTree t;
  t.node_lengths =
      random_lengths(total, std::uniform_int_distribution<int64_t>(1, 6)(rng), false, rng);
  const int64_t nodes = static_cast<int64_t>(t.node_lengths.size());
  std::vector<int64_t> parent(nodes, -1);
  std::vector<bool> leaf(nodes, true);
  for (int64_t n = 1; n < nodes; ++n) {
    parent[n] = std::uniform_int_distribution<int64_t>(0, n - 1)(rng);
    leaf[parent[n]] = false;
  }
  for (int64_t n = 0; n < nodes; ++n) {
    if (!leaf[n]) continue;
    std::vector<int64_t> path;
    for (int64_t u = n; u >= 0; u = parent[u]) path.insert(path.begin(), u);
    t.paths.push_back(path);
  }
  return t;
}

// A random DFlash spec over a context of `ctx_len` tokens with about ctx_len / 2 slots (sorted
// anchors, dropped blocks at the end, random documents, causal flag and window).
inline DFlashMaskSpec random_dflash(int64_t ctx_len, int64_t block_size, std::mt19937& rng) {
  DFlashMaskSpec s;
  s.ctx_len = ctx_len;
  s.block_size = block_size;
  const int64_t blocks = std::max<int64_t>(1, ctx_len / 2 / s.block_size);
  std::uniform_int_distribution<int64_t> anchor(0, std::max<int64_t>(ctx_len - s.block_size, 0));
  const int64_t kept = std::uniform_int_distribution<int64_t>(blocks / 2, blocks)(rng);
  for (int64_t j = 0; j < blocks; ++j) {
    s.anchors.push_back(j < kept ? anchor(rng) : 0);
    s.keep.push_back(j < kept);
  }
  std::sort(s.anchors.begin(), s.anchors.begin() + kept);
  s.causal = rng() % 2;
  if (rng() % 2) s.seq_lens = random_lengths(ctx_len, 1 + rng() % 4, true, rng);
  if (rng() % 2) s.sliding_window = std::uniform_int_distribution<int64_t>(1, 40)(rng);
  return s;
}

enum class MaskKind { causal, sliding_window, documents, prefix_trees, dflash, no_keys };
inline const char* mask_kind_name(MaskKind k) {
  switch (k) {
    case MaskKind::causal: return "causal";
    case MaskKind::sliding_window: return "sliding_window";
    case MaskKind::documents: return "documents";
    case MaskKind::prefix_trees: return "prefix_trees";
    case MaskKind::dflash: return "dflash";
    case MaskKind::no_keys: return "no_keys";
  }
  return "";
}
inline const std::vector<MaskKind> kAllMaskKinds = {MaskKind::causal,    MaskKind::sliding_window,
                                                    MaskKind::documents, MaskKind::prefix_trees,
                                                    MaskKind::dflash,    MaskKind::no_keys};

// A random mask of the kind over length t (queries and keys; dflash: a context of t tokens and
// blocks of 1 + t % 7 slots, so masks of one t share their shape).
// no_keys is a document mask whose last documents see nothing (fully masked rows).
inline Mask random_mask(MaskKind kind, int64_t t, std::mt19937& rng) {
  switch (kind) {
    case MaskKind::causal: return causal_mask(t);
    case MaskKind::sliding_window:
      return causal_mask(t, std::uniform_int_distribution<int64_t>(1, 80)(rng));
    case MaskKind::documents: return document_mask(random_lengths(t, 1 + rng() % 5, true, rng));
    case MaskKind::prefix_trees: {
      std::vector<Mask> trees;
      for (int64_t len : random_lengths(t, 1 + rng() % 2, false, rng)) {
        const RandomTree tree = random_tree(len, rng);
        trees.push_back(prefix_tree_mask(tree.node_lengths, tree.paths));
      }
      return block_diagonal(trees);
    }
    case MaskKind::dflash: return dflash_mask(random_dflash(t, 1 + t % 7, rng));
    case MaskKind::no_keys: {
      const int64_t seen = t / 2;
      return block_diagonal(
          {document_mask(random_lengths(seen, 2, true, rng)), Mask{t - seen, t - seen, {}}});
    }
  }
  return {};
}

}  // namespace sprig::testing
