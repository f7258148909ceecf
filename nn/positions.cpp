#include "nn/positions.h"

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <vector>

namespace sprig {

PositionLimit::PositionLimit(int64_t max_position_embeddings, bool strict, std::string where)
    : max_(max_position_embeddings), strict_(strict), where_(std::move(where)) {}

void PositionLimit::check(int64_t end, const std::string& what) {
  if (end <= max_) return;
  const std::string sentence = what + " reaches position " + std::to_string(end - 1) +
                               ", past the model's max_position_embeddings " + std::to_string(max_);
  if (strict_) throw std::runtime_error("[" + where_ + "] " + sentence + " (--strict-positions)");
  if (exceeded_++ == 0)
    std::cerr << "sprig: [" << where_ << "] warning: " << sentence
              << " (positions the model was not trained on; computed as transformers computes "
                 "them; --strict-positions refuses; later inputs past it are not reported)\n";
}

int64_t positions_end(const Tensor& position_ids) {
  if (!position_ids.defined() || position_ids.numel() == 0) return 0;
  const std::vector<int64_t> p = position_ids.to_vector<int64_t>();
  return *std::max_element(p.begin(), p.end()) + 1;
}

}  // namespace sprig
