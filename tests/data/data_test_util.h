// Helpers for the data tests: temporary files, in-memory corpora, batch row accessors.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/document.h"

namespace sprig::data::testing {

// A file in the temporary directory, removed when the object goes away.
class TempFile {
 public:
  explicit TempFile(const std::string& content, const std::string& suffix = ".jsonl") {
    static int counter = 0;
    path_ =
        (std::filesystem::temp_directory_path() /
         ("sprig_data_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + suffix))
            .string();
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() { std::filesystem::remove(path_); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Labels-form corpus whose labels equal the ids (as in docs/semantics.md E4).
inline Corpus labels_corpus(const std::vector<std::vector<int32_t>>& docs) {
  Corpus c;
  c.form = TargetForm::labels;
  c.sources = {"mem"};
  for (const auto& ids : docs) {
    Document d;
    d.input_ids = d.labels = ids;
    d.record = static_cast<int64_t>(c.docs.size()) + 1;
    c.docs.push_back(std::move(d));
  }
  return c;
}

// Loss-mask-form corpus from (ids, loss_mask) pairs.
inline Corpus loss_mask_corpus(
    const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>& docs) {
  Corpus c;
  c.form = TargetForm::loss_mask;
  c.sources = {"mem"};
  for (const auto& [ids, mask] : docs) {
    Document d;
    d.input_ids = ids;
    d.loss_mask = mask;
    d.record = static_cast<int64_t>(c.docs.size()) + 1;
    c.docs.push_back(std::move(d));
  }
  return c;
}

// Row r of a (B, N) int64 tensor.
inline std::vector<int64_t> row(const Tensor& t, int64_t r) {
  return t.select(0, r).contiguous().to_vector<int64_t>();
}

inline std::vector<int64_t> i64(std::initializer_list<int64_t> v) { return v; }

}  // namespace sprig::data::testing
