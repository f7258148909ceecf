// Collation of packed rows into a Batch (layouts of docs/semantics.md §4.7), and document ids from
// seq_lens.
#include "data/batch.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "data/prefix_tree.h"

namespace sprig::data {

namespace {

// Pointer to row r of a contiguous (B, S) int64 tensor.
int64_t* row_of(const Tensor& t, int64_t r) { return t.data<int64_t>() + r * t.size(1); }

Tensor batch_tensor(int64_t rows, int64_t seq_len) {
  return Tensor::empty({rows, seq_len}, DType::i64);
}

// A per-token f32 channel of the batch (advantages, old log-probs): zeros where no document
// writes, undefined when none of the batch's documents has it, an error when only some do.
Tensor token_values(const Corpus& corpus, const PackPlan& plan, const std::vector<int64_t>& row_ids,
                    std::vector<float> Document::*values, const char* what) {
  const Document* with = nullptr;
  const Document* without = nullptr;
  for (int64_t id : row_ids)
    for (const Segment& seg : plan.rows[id])
      ((corpus.docs[seg.doc].*values).empty() ? without : with) = &corpus.docs[seg.doc];
  if (!with) return {};
  if (without)
    throw std::invalid_argument("[collate] " + corpus.where(*without) + " has no " + what +
                                " while " + corpus.where(*with) + " in the same batch has");
  const int64_t S = plan.seq_len;
  Tensor out = Tensor::zeros({static_cast<int64_t>(row_ids.size()), S}, DType::f32);
  for (size_t r = 0; r < row_ids.size(); ++r) {
    float* row = out.data<float>() + static_cast<int64_t>(r) * S;
    for (const Segment& seg : plan.rows[row_ids[r]]) {
      std::copy_n((corpus.docs[seg.doc].*values).begin(), seg.length, row);
      row += seg.length;
    }
  }
  return out;
}

}  // namespace

int64_t Batch::num_tokens() const {
  return rows() * seq_len() - std::accumulate(num_pad.begin(), num_pad.end(), int64_t{0});
}

Batch collate(const Corpus& corpus, const PackPlan& plan, const std::vector<int64_t>& row_ids,
              int64_t pad_id) {
  const int64_t B = static_cast<int64_t>(row_ids.size()), S = plan.seq_len;
  if (B == 0) throw std::invalid_argument("[collate] no rows");
  size_t max_docs = 0;
  for (int64_t id : row_ids) {
    if (id < 0 || id >= static_cast<int64_t>(plan.rows.size()))
      throw std::invalid_argument("[collate] row " + std::to_string(id) + " out of range [0, " +
                                  std::to_string(plan.rows.size()) + ")");
    max_docs = std::max(max_docs, plan.rows[id].size());
  }
  const bool unshifted = corpus.form == TargetForm::loss_mask;
  Batch batch;
  batch.input_ids = batch_tensor(B, S);
  batch.position_ids = batch_tensor(B, S);
  if (unshifted) {
    batch.loss_mask = batch_tensor(B, S);
    batch.attention_mask = batch_tensor(B, S);
    batch.doc_remaining = batch_tensor(B, S);
  } else {
    batch.labels = batch_tensor(B, S);
  }
  if (!unshifted) {
    batch.advantages = token_values(corpus, plan, row_ids, &Document::advantages, "advantages");
    batch.old_logprobs =
        token_values(corpus, plan, row_ids, &Document::old_logprobs, "old_logprobs");
  }
  batch.seq_lens = Tensor::zeros({B, static_cast<int64_t>(max_docs)}, DType::i64);
  batch.num_pad.resize(B);

  for (int64_t r = 0; r < B; ++r) {
    int64_t* ids = row_of(batch.input_ids, r);
    int64_t* pos = row_of(batch.position_ids, r);
    int64_t* seq_lens = row_of(batch.seq_lens, r);
    // The supervision channel (labels, or loss_mask with attention_mask and doc_remaining).
    int64_t* target = row_of(unshifted ? batch.loss_mask : batch.labels, r);
    int64_t* attention = unshifted ? row_of(batch.attention_mask, r) : nullptr;
    int64_t* remaining = unshifted ? row_of(batch.doc_remaining, r) : nullptr;

    int64_t t = 0;  // tokens of the row written so far
    const RowPlan& row = plan.rows[row_ids[r]];
    for (size_t j = 0; j < row.size(); ++j) {
      const Document& doc = corpus.docs[row[j].doc];
      const int64_t len = row[j].length;
      std::copy_n(doc.input_ids.begin(), len, ids + t);
      if (!unshifted) {
        std::copy_n(doc.labels.begin(), len, target + t);
      } else {
        if (doc.loss_mask.empty())
          std::fill_n(target + t, len, 1);
        else
          std::copy_n(doc.loss_mask.begin(), len, target + t);
        std::fill_n(attention + t, len, 1);
        for (int64_t i = 0; i < len; ++i) remaining[t + i] = len - 1 - i;
      }
      if (corpus.folded) {
        write_tree_positions(doc.node_lengths, pos + t);
        batch.groups.push_back(
            {r, t, std::vector<int64_t>(doc.node_lengths.begin(), doc.node_lengths.end()),
             tree_sample_paths(doc.node_lengths)});
      } else {
        std::iota(pos + t, pos + t + len, int64_t{0});
      }
      seq_lens[j] = len;
      t += len;
    }

    const int64_t pad = S - t;
    batch.num_pad[r] = pad;
    seq_lens[row.size() - 1] += pad;
    std::fill_n(ids + t, pad, pad_id);
    std::fill_n(target + t, pad, unshifted ? 0 : kIgnoreIndex);
    if (unshifted) {
      std::fill_n(attention + t, pad, 0);
      std::fill_n(remaining + t, pad, 0);
    }
    for (int64_t i = t; i < S; ++i) pos[i] = std::min(pos[t - 1] + 1 + (i - t), S - 1);
  }
  return batch;
}

ScoredTokens scored_tokens(const Batch& batch, bool first_token) {
  if (!batch.labels.defined())
    throw std::invalid_argument("[scored_tokens] the batch has no labels (a loss_mask packing)");
  const int64_t B = batch.rows(), S = batch.seq_len();
  const std::vector<int64_t> labels = batch.labels.to_vector<int64_t>();
  const std::vector<int64_t> ids = batch.input_ids.to_vector<int64_t>();
  ScoredTokens out;
  // The sequence of every position (-1: none), and the first-token predictions.
  std::vector<int64_t> sequence(static_cast<size_t>(B * S), -1);
  struct Prediction {
    int64_t row, target, position, sequence;
  };
  std::vector<Prediction> firsts;
  if (!batch.groups.empty()) {
    for (const TreeGroup& g : batch.groups) {
      const int64_t prompt = g.node_lengths[0];
      int64_t t = g.row * S + g.offset + prompt;  // the current completion's first token
      for (size_t j = 1; j < g.node_lengths.size(); ++j) {
        if (first_token && prompt > 0)
          firsts.push_back({g.row * S + g.offset + prompt - 1, ids[t], t, out.num_sequences});
        std::fill_n(sequence.begin() + t, g.node_lengths[j], out.num_sequences++);
        t += g.node_lengths[j];
      }
    }
  } else {
    const std::vector<int64_t> lens = batch.seq_lens.to_vector<int64_t>();
    const int64_t docs = batch.seq_lens.size(1);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0, t = b * S; j < docs; t += lens[b * docs + j], ++j)
        if (lens[b * docs + j] > 0)
          std::fill_n(sequence.begin() + t, lens[b * docs + j], out.num_sequences++);
  }
  // Merge the labelled positions with the first-token predictions (both ascending by row).
  const size_t total = static_cast<size_t>(
      std::count_if(labels.begin(), labels.end(), [](int64_t l) { return l != kIgnoreIndex; }));
  for (std::vector<int64_t>* v : {&out.rows, &out.targets, &out.positions, &out.sequences})
    v->reserve(total + firsts.size());
  auto add = [&](const Prediction& p) {
    out.rows.push_back(p.row);
    out.targets.push_back(p.target);
    out.positions.push_back(p.position);
    out.sequences.push_back(p.sequence);
  };
  size_t f = 0;
  for (int64_t i = 0; i < B * S; ++i) {
    for (; f < firsts.size() && firsts[f].row <= i; ++f) add(firsts[f]);
    if (labels[i] != kIgnoreIndex) add({i, labels[i], i + 1, sequence[i]});
  }
  for (; f < firsts.size(); ++f) add(firsts[f]);
  return out;
}

Tensor context_doc_ids(const Tensor& seq_lens, int64_t seq_len) {
  if (seq_lens.dim() != 2)
    throw std::invalid_argument("[context_doc_ids] seq_lens must have 2 dimensions, got " +
                                std::to_string(seq_lens.dim()));
  const int64_t B = seq_lens.size(0), docs = seq_lens.size(1);
  const std::vector<int64_t> lens = seq_lens.to_vector<int64_t>();
  std::vector<int64_t> ids(B * seq_len);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t* row = lens.data() + b * docs;
    int64_t j = 0, cumsum = docs > 0 ? row[0] : 0;  // cumsum = seq_lens[b][0] + ... + [j]
    for (int64_t t = 0; t < seq_len; ++t) {
      while (j < docs && cumsum <= t) cumsum += ++j < docs ? row[j] : 0;
      ids[b * seq_len + t] = j;
    }
  }
  return Tensor::from_vector(ids, {B, seq_len});
}

}  // namespace sprig::data
