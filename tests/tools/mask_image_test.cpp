// The picture of a mask (`sprig mask --png`): its pixels, the tile grid, and the PNG file.
#include "tools/viz/mask_image.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tests/test_util.h"

namespace sprig {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("sprig_mask_image_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(MaskImage, PictureShowsMaskAndTileGrid) {
  // causal(4) drawn with a tile of 2: scale 16 (512 / 4 capped at 16), 64 x 64 pixels.
  const MaskImage img = render_mask(causal_mask(4), 2);
  ASSERT_EQ(img.scale, 16);
  ASSERT_EQ(img.width, 64);
  ASSERT_EQ(img.height, 64);
  auto at = [&](int64_t x, int64_t y) { return img.pixels[y * img.width + x]; };
  EXPECT_EQ(at(5, 5), 255);   // (q 0, k 0) allowed
  EXPECT_EQ(at(21, 5), 0);    // (q 0, k 1) masked
  EXPECT_EQ(at(0, 5), 170);   // grid column over an allowed element
  EXPECT_EQ(at(32, 5), 85);   // grid column (key 2 starts tile 1) over a masked element
  EXPECT_EQ(at(5, 32), 170);  // grid row (query 2) over an allowed element
  // A long mask keeps one pixel per element.
  EXPECT_EQ(render_mask(causal_mask(600)).scale, 1);
  EXPECT_EQ(testing::invalid_argument_message([] {
              render_mask(Mask{0, 3, {}});
            }),
            "[mask] cannot draw an empty mask [0, 3]");
}

TEST(MaskImage, PngFile) {
  const std::string path = temp_path("mask.png");
  save_mask_png(document_mask({3, 5}), path);
  const std::string bytes = read_bytes(path);
  ASSERT_GE(bytes.size(), 24u);
  EXPECT_EQ(bytes.substr(0, 8), "\x89PNG\r\n\x1a\n");
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(bytes[at + i]);
    return v;
  };
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(be32(16), 8u * 16);  // width: 8 keys at scale 16
  EXPECT_EQ(be32(20), 8u * 16);  // height
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sprig
