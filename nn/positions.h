// The one rule for positions past a model's max_position_embeddings, which every command that
// runs a model keeps (docs/semantics.md §6.2): RoPE rotates any position, in transformers as in
// sprig, but the model was not trained past its range, so an input that reaches there is computed
// with a warning, or refused under --strict-positions.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/tensor.h"

namespace sprig {

class PositionLimit {
 public:
  // `where` names the command in messages ("score"); `strict` refuses instead of warning.
  PositionLimit(int64_t max_position_embeddings, bool strict, std::string where);

  // `end`: one past the largest position `what` ("record 3", "a 90-token prompt and 50 new
  // tokens") reaches. Past the limit: the first time, one warning on stderr
  // "sprig: [where] warning: <what> reaches position <end - 1>, past the model's
  // max_position_embeddings <max> (...)"; strict, a std::runtime_error with that sentence.
  void check(int64_t end, const std::string& what);
  // How many checks passed the limit (each is warned about only once).
  int64_t exceeded() const { return exceeded_; }
  // Whether check(end) is the first past the limit: the one that warns.
  bool first_past(int64_t end) const { return end > max_ && exceeded_ == 0; }

 private:
  int64_t max_;
  bool strict_;
  std::string where_;
  int64_t exceeded_ = 0;
};

// One past the largest entry of position ids (any shape and device); 0 when empty.
int64_t positions_end(const Tensor& position_ids);

}  // namespace sprig
