// DataConfig: the `data:` section of a training config (plus the top-level `seed`), e.g.
//   seed: 0
//   data:
//     train: docs.jsonl            # a path or a list of paths
//     val: val.jsonl               # optional
//     format: documents            # documents | rollouts | shards
//     seq_len: 4096
//     packing: dflash              # dflash | padded | sft | bfd (documents, shards) ; fold
//     (rollouts) micro_batch_size: 2
// Other keys (defaults): pad_id (0), eot_id (shards), vocab_size (unchecked), skip_bad_records
// (false), shuffle (true), drop_long_samples (true), max_packs (all), and for rollouts
// `rollouts: {supervise_first_token: false}` (docs/semantics.md §1.7). An unknown key in `data:` is
// an error that names the closest valid key; other top-level sections are not read here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/packing.h"
#include "data/readers.h"

namespace YAML {
class Node;
}

namespace sprig::data {

struct DataConfig {
  std::vector<std::string> train, val;
  DataFormat format = DataFormat::documents;
  int64_t seq_len = 0;
  Packing packing = Packing::fold;
  int64_t micro_batch_size = 1;
  int64_t pad_id = 0;
  int64_t eot_id = -1;
  int64_t vocab_size = 0;
  bool skip_bad_records = false;
  bool shuffle = true;
  bool drop_long_samples = true;
  int64_t max_packs = 0;
  // Rollouts: also supervise each completion's first token from the last prompt position.
  bool supervise_first_token = false;
  uint64_t seed = 0;

  ReadOptions read_options() const {
    return {vocab_size, eot_id, skip_bad_records, supervise_first_token};
  }
  PackOptions pack_options() const { return {packing, seq_len, drop_long_samples, max_packs}; }
};

// Throws std::invalid_argument "[config] unknown key <prefix><key> (did you mean <prefix><k>?)"
// unless `key` is one of `keys` (the suggestion is the closest by edit distance). Shared by every
// section of a training config.
void check_known_key(const std::string& key, const std::vector<std::string>& keys,
                     const std::string& prefix);

// The YAML file at `path`, parsed, with no key twice in any mapping (YAML readers keep one of the
// two silently): std::invalid_argument "[config] <path>:11: train.max_steps appears twice (also on
// line 10)", or "[config] <path>:3: <the parser's message>". Every config file is read by this.
YAML::Node load_yaml_file(const std::string& path);

// Makes the path, or the list of paths, at `node` absolute against `base` (a relative path in a
// config file means one beside the file, wherever the command runs). Anything but strings is left
// for the reader to refuse.
void make_paths_absolute(YAML::Node node, const std::filesystem::path& base);

// Reads `seed` and `data:` of a parsed config; throws std::invalid_argument naming the key.
DataConfig parse_data_config(const YAML::Node& root);
// A config file's `data:`, its paths resolved against the file's directory.
DataConfig load_data_config(const std::string& path);

}  // namespace sprig::data
