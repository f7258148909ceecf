// Helpers for the training tests: temporary run directories, a tiny training config over the
// bundled example data, and exact comparisons of checkpoint tensors.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/safetensors.h"
#include "tests/test_util.h"
#include "train/config.h"

namespace sprig::testing {

namespace fs = std::filesystem;

// A fresh directory under the temporary directory, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "sprig_train_test_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Whether `text` contains `part` (failures show both).
inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

inline std::string source_path(const std::string& relative) {
  return testing::source_dir() + "/" + relative;
}

// A config training the tiny Qwen3 of train/configs on the bundled synthetic documents: small
// rows, short runs, no logging noise (tiny_config applies "a.b=value" overrides).
inline std::string tiny_config_yaml(const std::string& run_dir) {
  return "run_dir: " + run_dir + "\n" +
         "seed: 3\n"
         "device: cpu\n"
         "model:\n"
         "  config: " +
         source_path("train/configs/tiny_qwen3.json") + "\n" +
         "data:\n"
         "  train: " +
         source_path("train/configs/tiny_docs.jsonl") + "\n" +
         "  format: documents\n"
         "  seq_len: 64\n"
         "  packing: bfd\n"
         "  micro_batch_size: 2\n"
         "  max_packs: 8\n"
         "train:\n"
         "  max_steps: 6\n"
         "optimizer:\n"
         "  lr: 3.0e-3\n"
         "  betas: [0.9, 0.95]\n"
         "  weight_decay: 0.1\n"
         "scheduler:\n"
         "  warmup_steps: 2\n"
         "log:\n"
         "  every_steps: 100\n"
         "checkpoint:\n"
         "  keep_last: 2\n";
}

// Writes tiny_config_yaml(<dir>/run) to <dir>/config.yaml and returns its path.
inline std::string write_tiny_config(const TempDir& dir) {
  const std::string path = dir / "config.yaml";
  write_text(path, tiny_config_yaml(dir / "run"));
  return path;
}

inline TrainConfig tiny_config(const TempDir& dir, const std::vector<std::string>& overrides = {}) {
  return load_train_config(write_tiny_config(dir), overrides);
}

// A DFlash draft (or, by `kind`, a Domino or JetSpec one) for a fresh tiny Qwen3 target
// (train/configs/tiny_dflash.yaml, shortened), in <dir>/dflash.yaml with its run directory
// <dir>/run.
inline TrainConfig tiny_dflash_config(
    const TempDir& dir, const std::vector<std::string>& overrides = {},
    const speculative::DraftKind* kind = &speculative::dflash_kind()) {
  const std::string path = dir / "dflash.yaml";
  write_text(
      path,
      "run_dir: " + (dir / "run") + "\nseed: 1\ndevice: cpu\ntarget:\n  config: " +
          source_path("train/configs/tiny_qwen3.json") +
          "\ndraft:\n  mask_token_id: 63\n  num_layers: 1\n  block_size: 4\n"
          "  num_anchors: 8\n" +
          (kind == &speculative::jetspec_kind() ? "" : "  loss_decay_gamma: 2.0\n") +
          (kind == &speculative::domino_kind() ? "  emb_dim: 16\n  gru_hidden_dim: 16\n" : "") +
          "data:\n  train: " + source_path("train/configs/tiny_docs.jsonl") +
          "\n  format: documents\n  seq_len: 64\n  packing: dflash\n"
          "  micro_batch_size: 2\n  max_packs: 8\ntrain:\n  max_steps: 6\n"
          "optimizer:\n  lr: 3.0e-3\nscheduler:\n  warmup_steps: 2\n"
          "log:\n  every_steps: 100\ncheckpoint:\n  keep_last: 2\n");
  return load_train_config(path, overrides, kind);
}

// An EAGLE-3 draft over target layers 0 and 1 of a fresh tiny Qwen3 target, 3 steps, in
// <dir>/eagle3.yaml with its run directory <dir>/run.
inline TrainConfig tiny_eagle3_config(const TempDir& dir,
                                      const std::vector<std::string>& overrides = {}) {
  const std::string path = dir / "eagle3.yaml";
  write_text(path, "run_dir: " + (dir / "run") + "\nseed: 1\ndevice: cpu\ntarget:\n  config: " +
                       source_path("train/configs/tiny_qwen3.json") +
                       "\ndraft:\n  aux_layer_ids: [0, 1]\n  ttt_steps: 3\n"
                       "data:\n  train: " +
                       source_path("train/configs/tiny_docs.jsonl") +
                       "\n  format: documents\n  seq_len: 64\n  packing: dflash\n"
                       "  micro_batch_size: 2\n  max_packs: 8\ntrain:\n  max_steps: 6\n"
                       "optimizer:\n  lr: 3.0e-3\nscheduler:\n  warmup_steps: 2\n"
                       "log:\n  every_steps: 100\ncheckpoint:\n  keep_last: 2\n");
  return load_eagle3_train_config(path, overrides);
}

// Every tensor of a safetensors file, by name.
inline std::map<std::string, Tensor> read_tensors(const std::string& path) {
  SafetensorsFile file(path);
  std::map<std::string, Tensor> out;
  for (const StTensorInfo& t : file.tensors()) out[t.name] = file.load(t.name);
  return out;
}

// The model.safetensors of the checkpoint `latest` names in a run directory.
inline std::map<std::string, Tensor> latest_weights(const std::string& run_dir) {
  std::string name;
  std::ifstream(run_dir + "/checkpoints/latest") >> name;
  return read_tensors(run_dir + "/checkpoints/" + name + "/model.safetensors");
}

// The records of a run's metrics.jsonl, in order, without the timings (tokens_per_s, mfu,
// comm_share), which differ between runs: everything else is exact.
inline std::vector<nlohmann::json> metrics_of(const std::string& run_dir) {
  std::vector<nlohmann::json> records;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json r = nlohmann::json::parse(line);
    for (const char* measured : {"tokens_per_s", "mfu", "comm_share", "peak_memory_bytes"})
      r.erase(measured);
    records.push_back(r);
  }
  return records;
}

// The largest peak_memory_bytes of a run's metrics.jsonl (what metrics_of leaves out).
inline double peak_memory_of(const std::string& run_dir) {
  double peak = 0;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);)
    peak = std::max(peak, nlohmann::json::parse(line).at("peak_memory_bytes").get<double>());
  return peak;
}

// Same names, shapes, dtypes and bytes.
inline void expect_bit_identical(const std::map<std::string, Tensor>& a,
                                 const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, x] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    const Tensor& y = b.at(name);
    ASSERT_EQ(x.shape(), y.shape()) << name;
    ASSERT_EQ(x.dtype(), y.dtype()) << name;
    const Tensor cx = x.contiguous(), cy = y.contiguous();
    EXPECT_EQ(std::memcmp(cx.data_ptr(), cy.data_ptr(), cx.nbytes()), 0) << name << " differs";
  }
}

}  // namespace sprig::testing
