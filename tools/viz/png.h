// PNG files from 8-bit pixel buffers (libpng's simplified API): the picture of an attention mask,
// training curves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/output.h"

namespace sprig {

// Writes `height` rows of `width` pixels, row-major, `channels` bytes per pixel: 1 (gray) or 3
// (RGB). Throws std::runtime_error naming the file when it cannot be written.
void write_png(const std::string& path, int64_t width, int64_t height, int channels,
               const std::vector<uint8_t>& pixels);

// A file with the PNG signature: what `--overwrite` may replace for a picture.
extern const OutputKind kPngOutput;

}  // namespace sprig
