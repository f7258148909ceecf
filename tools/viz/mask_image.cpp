#include "tools/viz/mask_image.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "tools/viz/png.h"

namespace sprig {

MaskImage render_mask(const Mask& mask, int64_t tile) {
  if (mask.q_len < 1 || mask.k_len < 1)
    throw std::invalid_argument("[mask] cannot draw an empty mask [" + std::to_string(mask.q_len) +
                                ", " + std::to_string(mask.k_len) + "]");
  if (tile < 1)
    throw std::invalid_argument("[mask] tile must be >= 1, got " + std::to_string(tile));
  if (std::max(mask.q_len, mask.k_len) > kMaxMaskImageSide)
    throw std::invalid_argument(
        "[mask] a [" + std::to_string(mask.q_len) + ", " + std::to_string(mask.k_len) +
        "] mask is too large to draw (at most " + std::to_string(kMaxMaskImageSide) + " per side)");
  MaskImage img;
  img.scale = std::clamp<int64_t>(512 / std::max(mask.q_len, mask.k_len), 1, 16);
  img.width = mask.k_len * img.scale;
  img.height = mask.q_len * img.scale;
  img.pixels.resize(static_cast<size_t>(img.width * img.height));
  const Tensor dense = mask.dense();
  const bool* allowed = dense.data<bool>();
  const int64_t grid = tile * img.scale;
  for (int64_t y = 0; y < img.height; ++y)
    for (int64_t x = 0; x < img.width; ++x) {
      const bool on = allowed[(y / img.scale) * mask.k_len + x / img.scale];
      const bool line = y % grid == 0 || x % grid == 0;
      img.pixels[y * img.width + x] = on ? (line ? 170 : 255) : (line ? 85 : 0);
    }
  return img;
}

void save_mask_png(const Mask& mask, const std::string& path, int64_t tile) {
  const MaskImage img = render_mask(mask, tile);
  write_png(path, img.width, img.height, 1, img.pixels);
}

}  // namespace sprig
