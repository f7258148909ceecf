// libFuzzer target: JSON mask specs (attention/mask_io.h). A spec that parses must give a valid
// mask; small ones are compiled into a tile map (attention/tile_map.h) whose entries and keep
// bits must say exactly what the dense mask says. Bad specs must be rejected with an exception
// that says why.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "attention/mask_io.h"
#include "attention/tile_map.h"
#include "tools/fuzz/fuzz_input.h"

namespace {

constexpr int32_t kBlock = 16;

// Every allowed (q, k) lies in a listed tile whose kind and keep bits allow it, and no listed
// partial tile allows a masked pair.
void check_tile_map(const sprig::Mask& mask) {
  const sprig::TileMap map =
      sprig::compile_tile_map(sprig::row_intervals(sprig::BatchMask(mask)), kBlock, kBlock);
  const sprig::Tensor dense = mask.dense();
  const bool* allowed = dense.data<bool>();
  std::vector<uint8_t> covered(static_cast<size_t>(mask.q_len * mask.k_len), 0);
  for (int32_t t = 0; t < map.num_q_tiles; ++t)
    for (int32_t e = map.by_query.ptr[t]; e < map.by_query.ptr[t + 1]; ++e) {
      const int64_t k0 = map.by_query.start[e];
      for (int64_t i = 0; i < kBlock && t * kBlock + i < mask.q_len; ++i)
        for (int64_t j = 0; j < kBlock && k0 + j < mask.k_len; ++j) {
          const int64_t q = t * kBlock + i, k = k0 + j;
          const bool keep = map.by_query.kind[e] == static_cast<int32_t>(sprig::TileKind::full) ||
                            map.allowed_in_partial(map.by_query.mask_idx[e], i, j);
          if (keep != allowed[q * mask.k_len + k]) std::abort();
          covered[q * mask.k_len + k] = 1;
        }
    }
  for (int64_t x = 0; x < mask.q_len * mask.k_len; ++x)
    if (allowed[x] && !covered[x]) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::optional<sprig::Mask> mask;
  sprig::fuzz::expect_parse_or_reject([&] { mask = sprig::parse_mask_spec(text); });
  if (!mask) return 0;
  mask->validate();  // a parsed spec is a valid mask: a throw here ends the run as a finding
  if (mask->q_len <= 256 && mask->k_len <= 256) check_tile_map(*mask);
  return 0;
}
