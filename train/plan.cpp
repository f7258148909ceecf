#include "train/plan.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "speculative/draft_vocab.h"

namespace sprig {

namespace fs = std::filesystem;

StepShapes sft_step_shapes(const QwenConfig& model, const data::DataConfig& data) {
  StepShapes s;
  s.layers = model;
  s.tokens = data.micro_batch_size * data.seq_len;
  s.batch_tokens = s.tokens;
  return s;
}

StepShapes draft_step_shapes(const speculative::DraftConfig& draft, int64_t target_parameters,
                             int64_t num_anchors, const data::DataConfig& data) {
  const int64_t rows = data.micro_batch_size, context = rows * data.seq_len;
  StepShapes s;
  s.layers = draft.layers;
  s.layers.vocab_size = draft.vocab_rows();  // the head's rows
  s.tokens = rows * num_anchors * draft.block_size;
  s.context_tokens = context;
  s.frozen_parameters = target_parameters;
  s.kept_elements = context * draft.context_width();
  s.batch_tokens = context;
  return s;
}

StepShapes eagle3_step_shapes(const speculative::Eagle3Config& draft, int64_t target_parameters,
                              int64_t ttt_steps, const data::DataConfig& data) {
  const int64_t tokens = data.micro_batch_size * data.seq_len;
  StepShapes s;
  s.layers = draft.layer;  // its one layer, run once per step: a stack of ttt_steps layers
  s.layers.num_hidden_layers = ttt_steps;
  s.layers.vocab_size = draft.draft_vocab_size;
  s.tokens = tokens;
  // Besides a decoder layer's set a step keeps its embeddings, their norm and the hidden states'
  // (3H) and its logits (the draft vocabulary); checkpointed, those and the queries, keys and
  // values the rest of the step is rebuilt from (the keys and values later steps attend to).
  const QwenConfig& l = draft.layer;
  const int64_t H = l.hidden_size, q = l.num_attention_heads * l.head_dim,
                k = l.num_key_value_heads * l.head_dim;
  s.layer_extra_width = 3 * H + draft.draft_vocab_size;
  s.checkpoint_extra_width = s.layer_extra_width + q + 2 * k;
  s.frozen_parameters = target_parameters;
  s.kept_elements = tokens * (draft.aux_width() + draft.layer.vocab_size);
  s.batch_tokens = tokens;
  return s;
}

StepShapes PlannedStep::shapes() const {
  StepShapes s = shapes_for(data);
  s.checkpoint_every = checkpoint_every;
  s.optimizer_shards = shard != Sharding::none ? ranks : 1;
  s.gradient_shards = shard == Sharding::gradients ? ranks : 1;
  s.gradients_persist = ranks > 1 || grad_accumulation > 1;
  return s;
}

namespace {

// The model of model.path / target.path (its config.json) or of model.config / target.config.
QwenConfig model_config(const std::string& path, const std::string& config) {
  return QwenConfig::load(path.empty() ? config : (fs::path(path) / "config.json").string());
}

int64_t count(const std::vector<ParameterPart>& parts) {
  double n = 0;
  for (const ParameterPart& part : parts) n += part.count;
  return static_cast<int64_t>(std::min(n, 1e18));
}

std::string describe(const QwenConfig& m) {
  return "a " + m.model_type + " model (" + std::to_string(m.num_hidden_layers) +
         " layers, hidden " + std::to_string(m.hidden_size) + ", vocabulary " +
         std::to_string(m.vocab_size) + ")";
}

// The size of draft.vocab's vocabulary over `target`, or 0 (the whole one) without one.
int64_t draft_vocab_size(const std::string& vocab, const QwenConfig& target) {
  return vocab.empty() ? 0 : speculative::read_draft_vocabulary(vocab, target.vocab_size).size();
}

}  // namespace

PlannedStep plan_step(const TrainConfig& c) {
  PlannedStep p;
  p.data = c.data;
  p.checkpoint_every = c.activation_checkpointing;
  p.shard = c.shard;
  p.grad_accumulation = c.grad_accumulation_steps;
  p.compute = c.model_dtype == "f32" ? DType::f32 : DType::bf16;
  if (!c.is_draft()) {
    const QwenConfig model = model_config(c.model_path, c.model_config);
    p.what = "sft of " + describe(model);
    p.trained_parameters = count(model.parameter_parts());
    p.shapes_for = [model](const data::DataConfig& d) { return sft_step_shapes(model, d); };
    return p;
  }
  const QwenConfig target = model_config(c.target_path, c.target_config);
  const int64_t target_parameters = count(target.parameter_parts());
  if (c.eagle3) {
    const Eagle3TrainConfig& e = c.eagle3_draft;
    speculative::Eagle3Options options = e.draft;
    options.draft_vocab_size = draft_vocab_size(e.vocab, target);
    const speculative::Eagle3Config draft = e.init.empty()
                                                ? speculative::eagle3_config_for(target, options)
                                                : speculative::load_eagle3_config(e.init);
    p.what = "an EAGLE-3 draft of " + describe(target);
    p.trained_parameters = count(draft.parameter_parts());
    p.shapes_for = [draft, target_parameters, steps = e.ttt_steps](const data::DataConfig& d) {
      return eagle3_step_shapes(draft, target_parameters, steps, d);
    };
    return p;
  }
  speculative::DraftOptions options = c.dflash.draft;
  options.draft_vocab_size = draft_vocab_size(c.dflash.vocab, target);
  const speculative::DraftConfig draft = c.dflash.init.empty()
                                             ? speculative::draft_config_for(target, options)
                                             : speculative::load_draft_config(c.dflash.init);
  p.what = "a " + std::string(c.draft_kind->name()) + " draft (" +
           std::to_string(draft.layers.num_hidden_layers) + " layers) of " + describe(target);
  p.trained_parameters = count(draft.parameter_parts());
  p.shapes_for = [draft, target_parameters,
                  anchors = c.dflash.num_anchors](const data::DataConfig& d) {
    return draft_step_shapes(draft, target_parameters, anchors, d);
  };
  return p;
}

double gpu_memory(const std::string& gpu) {
  static const std::map<std::string, double> mib = {
      {"h200", 143771}, {"h100", 81559}, {"a100-80", 81920}};
  if (const auto it = mib.find(gpu); it != mib.end()) return it->second * 1024 * 1024;
  size_t end = 0;
  double gib = 0;
  try {
    gib = std::stod(gpu, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  if (end == 0 || end != gpu.size() || !std::isfinite(gib) || gib <= 0 || gib > 1e6)
    throw std::invalid_argument(
        "[plan] --gpu must be h200, h100, a100-80 or a number of GiB, got '" + gpu + "'");
  return gib * 1024 * 1024 * 1024;
}

namespace {

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", bytes / (1024.0 * 1024.0));
  return buf;
}

std::string checkpointing_name(int64_t every) {
  return every == 0 ? "none" : every == 1 ? "layers" : "every_" + std::to_string(every);
}

// The smallest change of `p` whose estimate fits in `bytes`, as overrides, or "" when none does:
// on several ranks sharding the optimizer's state first, then the gradients too, then more
// activation checkpointing (they change nothing the run computes), then smaller micro-batches,
// then shorter rows; each change is kept while the next is tried.
std::string fitting_change(PlannedStep p, double bytes) {
  const auto total = [](const PlannedStep& q) {
    return estimate_step_memory(q.shapes(), q.trained_parameters, q.compute).total();
  };
  const auto fits = [&] { return total(p) <= bytes; };
  std::string kept;  // the changes made so far
  const auto with = [&](const std::string& change) {
    return kept.empty() ? change : kept + " " + change;
  };
  if (p.ranks > 1) {  // the sharding that fits, else the one that saves the most
    PlannedStep least = p;
    for (const Sharding shard : {Sharding::optimizer, Sharding::gradients}) {
      if (p.shard >= shard) continue;  // Sharding's order: none, optimizer, gradients
      PlannedStep q = p;
      q.shard = shard;
      const std::string change =
          shard == Sharding::optimizer ? "--train.shard=optimizer" : "--train.shard=gradients";
      if (total(q) <= bytes) return change;
      if (total(q) < total(least)) {
        least = q;
        kept = change;
      }
    }
    p = least;
  }
  std::string checkpointing;
  for (int64_t every : {int64_t{2}, int64_t{1}}) {
    if (p.checkpoint_every != 0 && p.checkpoint_every <= every) continue;
    p.checkpoint_every = every;
    checkpointing = "--train.activation_checkpointing=" + checkpointing_name(every);
    if (fits()) return with(checkpointing);
  }
  if (!checkpointing.empty()) kept = with(checkpointing);  // layers, when set here
  while (p.data.micro_batch_size > 1) {
    p.data.micro_batch_size /= 2;
    if (fits()) return with("--data.micro_batch_size=" + std::to_string(p.data.micro_batch_size));
  }
  while (p.data.seq_len >= 256) {
    p.data.seq_len /= 2;
    if (fits())
      return with("--data.micro_batch_size=1 --data.seq_len=" + std::to_string(p.data.seq_len));
  }
  return "";
}

}  // namespace

std::string plan_report(const PlannedStep& step, int64_t gpus, const std::string& gpu) {
  const double bytes = gpu_memory(gpu);
  PlannedStep p = step;
  p.ranks = gpus;
  const bool sharded = p.shard != Sharding::none && gpus > 1;
  const bool sharded_gradients = p.shard == Sharding::gradients && gpus > 1;
  const MemoryEstimate e = estimate_step_memory(p.shapes(), p.trained_parameters, p.compute);
  const std::string c = dtype_name(p.compute);
  std::ostringstream out;
  char trained[32];
  std::snprintf(trained, sizeof trained, "%.3f", static_cast<double>(p.trained_parameters) / 1e9);
  out << "sprig plan: " << p.what << "; " << trained << "B parameters trained in " << c
      << " with f32 masters and AdamW\n";
  out << "micro-batch " << p.data.micro_batch_size << " x " << p.data.seq_len
      << " tokens, activation checkpointing " << checkpointing_name(p.checkpoint_every) << "; "
      << gpus << " x " << gpu << " (" << gib(bytes) << " GiB each)\n";
  const double used = e.total();
  // The parts in GiB, or for a step under 1 GiB (a small draft) in MiB.
  const bool small = used < 1024.0 * 1024.0 * 1024.0;
  const auto amount = [&](double value) { return small ? mib(value) : gib(value); };
  out << "one rank holds (" << (small ? "MiB" : "GiB") << "):\n";
  const auto row = [&](const std::string& part, const std::string& note, double value) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-22s %-40s %9s\n", part.c_str(), note.c_str(),
                  amount(value).c_str());
    out << line;
  };
  row("trained weights",
      "f32 masters" + std::string(sharded && p.compute != DType::f32 ? ", this rank's shard" : ""),
      e.masters);
  if (e.compute_copy > 0) row("", c + " copy the model computes with", e.compute_copy);
  if (e.frozen > 0) row("frozen target", c, e.frozen);
  row("gradients", sharded_gradients ? c + ", this rank's shard and one whole bucket" : c,
      e.gradients);
  row("AdamW moments",
      sharded ? "f32, two per parameter, this rank's shard" : "f32, two per parameter", e.moments);
  row("activations", "kept for the backward", e.activations);
  const int64_t layers = p.shapes().layers.num_hidden_layers;
  const int64_t checkpointed = p.checkpoint_every == 0 ? 0 : (layers - 1) / p.checkpoint_every + 1;
  if (checkpointed < layers) row("", "a layer's (no T x T attention scores)", e.layer);
  if (checkpointed > 0)
    row("",
        "a checkpointed layer's (" + std::to_string(checkpointed) + " of " +
            std::to_string(layers) + ")",
        e.checkpointed_layer);
  if (e.kept > 0) row("target states", "captured for the step", e.kept);
  row("loss", "the head's logits chunk, input gradient", e.loss);
  row("batches", "in use and prefetched", e.batches);
  const std::string verdict =
      used <= bytes ? "fits (" + std::to_string(static_cast<int>(100 * used / bytes)) + "%)"
                    : "does not fit";
  char total[160];
  std::snprintf(total, sizeof total, "  %-63s %9s %s of %s GiB: %s\n", "total",
                amount(used).c_str(), small ? "MiB" : "GiB", gib(bytes).c_str(), verdict.c_str());
  out << total;
  if (sharded_gradients)
    out << "data parallel, train.shard gradients: each of the " << gpus
        << " ranks holds the weights whole and 1/" << gpus
        << " of the gradients and AdamW state, and trains its own micro-batches\n";
  else if (sharded)
    out << "data parallel, train.shard optimizer: each of the " << gpus
        << " ranks holds the weights and gradients whole and 1/" << gpus
        << " of the AdamW state, and trains its own micro-batches\n";
  else if (gpus > 1)
    out << "data parallel: each of the " << gpus
        << " ranks holds all of this (the weights, gradients and AdamW state whole) and trains "
           "its own micro-batches\n";
  if (used > bytes) {
    const std::string change = fitting_change(p, bytes);
    if (!change.empty())
      out << "the smallest change that fits: " << change << "\n";
    else
      out << "no activation checkpointing, micro-batch or row length fits: the weights, "
             "gradients and AdamW state alone take "
          << gib(e.parameters() + e.optimizer()) << " GiB\n";
  }
  out << "(an estimate from shapes, docs/semantics.md §10.12)\n";
  return out.str();
}

}  // namespace sprig
