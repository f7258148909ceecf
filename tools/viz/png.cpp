#include "tools/viz/png.h"

#include <png.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace sprig {

namespace {

// sprig's PNGs record no writer: a file with the PNG signature passes.
std::string refuses_png(const std::filesystem::path& existing, const OutputKind& kind) {
  static const char kSignature[8] = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
  std::ifstream in(existing, std::ios::binary);
  char head[8];
  const bool png = in.read(head, 8) && std::memcmp(head, kSignature, 8) == 0;
  return png ? "" : "is not a " + std::string(kind.name) + " that sprig wrote";
}

}  // namespace

const OutputKind kPngOutput{"PNG", nullptr, false, refuses_png};

void write_png(const std::string& path, int64_t width, int64_t height, int channels,
               const std::vector<uint8_t>& pixels) {
  if (channels != 1 && channels != 3)
    throw std::invalid_argument("[write_png] channels must be 1 or 3, got " +
                                std::to_string(channels));
  if (width <= 0 || height <= 0 || pixels.size() != static_cast<size_t>(width * height * channels))
    throw std::invalid_argument("[write_png] " + std::to_string(pixels.size()) +
                                " bytes do not make a " + std::to_string(width) + "x" +
                                std::to_string(height) + " image of " + std::to_string(channels) +
                                " channels");
  png_image png{};
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(width);
  png.height = static_cast<png_uint_32>(height);
  png.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  if (!png_image_write_to_file(&png, path.c_str(), 0, pixels.data(), 0, nullptr))
    throw std::runtime_error(path + ": cannot write the PNG (" + png.message + ")");
}

}  // namespace sprig
