// The picture of an attention mask (`sprig mask --png`): allowed elements white, masked ones
// black, with the grid of the kernels' tiles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attention/mask.h"

namespace sprig {

// The picture of a mask: `scale` x `scale` pixels per element (scale grows up to 16 until the
// longer side reaches 512 pixels), allowed white (255), masked black (0); the first pixel row and
// column of every tile of `tile` elements (the grid) are gray: 170 over allowed, 85 over masked.
struct MaskImage {
  int64_t width = 0, height = 0, scale = 1;
  std::vector<uint8_t> pixels;  // row-major, one byte per pixel
};
constexpr int64_t kMaxMaskImageSide = 16384;  // longer masks are refused: no picture shows them
MaskImage render_mask(const Mask& mask, int64_t tile = 64);
void save_mask_png(const Mask& mask, const std::string& path, int64_t tile = 64);

}  // namespace sprig
