// safetensors: round trips for every dtype and one crafted bad file per validation rule.
#include "tensor/safetensors.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/test_util.h"

namespace sprig {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("sprig_st_" + name)).string();
}

// A file image: 8-byte little-endian length, header text, then `data` bytes.
std::string image(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  return out + header + data;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Expects opening `bytes` as a file to fail with a message containing `needle`.
void expect_rejected(const std::string& bytes, const std::string& needle) {
  const std::string path = temp_path("bad.safetensors");
  write_file(path, bytes);
  try {
    SafetensorsFile f(path);
    ADD_FAILURE() << "accepted a bad file; expected an error containing: " << needle;
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

TEST(Safetensors, RoundTripsEveryDtype) {
  const std::string path = temp_path("roundtrip.safetensors");
  std::vector<SafetensorsEntry> entries = {
      {"a.f32", testing::rand_normal({3, 5}, 1)},
      {"b.f64", testing::rand_normal({2}, 2, DType::f64)},
      {"c.bf16", testing::rand_normal({4, 1, 2}, 3, DType::bf16)},
      {"d.f16", testing::rand_normal({7}, 4, DType::f16)},
      {"e.i64", Tensor::from_vector<int64_t>({-1, 5, 1LL << 40}, {3})},
      {"f.i32", Tensor::from_vector<int32_t>({7, -8}, {1, 2})},
      {"g.bool", Tensor::from_vector<bool>({true, false, true}, {3})},
      {"h.u8", Tensor::from_vector<bool>({false, true}, {2}), /*as_u8=*/true},
      {"scalar", Tensor::scalar(2.5)},
      {"empty", Tensor::empty({0, 4})},
  };
  save_safetensors(path, entries, {{"note", "hello"}});
  SafetensorsFile f(path);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  EXPECT_EQ(f.metadata().at("note"), "hello");
  EXPECT_EQ(f.tensors().size(), entries.size());
  for (const auto& e : entries) {
    const Tensor t = f.load(e.name);
    EXPECT_EQ(t.shape(), e.tensor.shape()) << e.name;
    EXPECT_EQ(testing::max_abs_diff(t.to(DType::f64), e.tensor.to(DType::f64)), 0.0) << e.name;
  }
  EXPECT_STREQ(st_dtype_name(f.info("h.u8").dtype), "U8");
  EXPECT_EQ(f.load("h.u8").dtype(), DType::i32);
  // Header is padded so the data section starts 8-byte aligned.
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
}

TEST(Safetensors, RejectsEachRuleViolation) {
  const std::string t4 = R"("t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  expect_rejected("abc", "too small");
  {  // header length beyond the cap
    std::string b(8, '\0');
    b[4] = 1;  // 2^32
    expect_rejected(b, "exceeds the limit");
  }
  expect_rejected(image("{" + t4 + "}", "abc").substr(0, 20), "truncated");
  expect_rejected(image("[" + t4 + "]", "abcd"), "does not start with '{'");
  expect_rejected(image("{\"t\":\xff}", ""), "UTF-8");
  expect_rejected(image("{" + t4 + ",}", "abcd"), "not valid JSON");
  // A number beyond double's range (found by fuzz_safetensors: it escaped as json's out_of_range).
  expect_rejected(image(R"({"t":{"dtype":"F32","shape":[1e99999],"data_offsets":[0,4]}})", "abcd"),
                  "not valid JSON");
  expect_rejected(image("{" + t4 + "," + t4 + "}", "abcd"),
                  "key \"t\" appears twice in one object");
  expect_rejected(image(R"({"t":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", "a"),
                  "unsupported dtype F8");
  expect_rejected(image(R"({"t":{"dtype":"F32","shape":[1]}})", "abcd"), "needs dtype");
  expect_rejected(image(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"),
                  "non-negative integer");
  expect_rejected(image(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"),
                  "do not match 2 elements");
  expect_rejected(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                        R"("b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
                        "abcdef"),
                  "overlaps");
  expect_rejected(image(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "abcdefgh"),
                  "gap");
  expect_rejected(image("{" + t4 + "}", "abcdXY"), "2 trailing bytes");
  expect_rejected(image("{" + t4 + "}", "ab"), "truncated");
  expect_rejected(image(R"({"__metadata__":{"k":1}})", ""), "not a string");
  expect_rejected(
      image(R"({"t":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,4]}})",
            "abcd"),
      "overflows");
}

TEST(Safetensors, NamesMissingTensor) {
  const std::string path = temp_path("one.safetensors");
  save_safetensors(path, {{"x", Tensor::zeros({2})}});
  SafetensorsFile f(path);
  EXPECT_TRUE(f.contains("x"));
  EXPECT_FALSE(f.contains("y"));
  EXPECT_THROW(f.load("y"), std::runtime_error);
}

TEST(Safetensors, WriterRejectsDuplicateNames) {
  EXPECT_THROW(save_safetensors(temp_path("dup.safetensors"),
                                {{"x", Tensor::zeros({1})}, {"x", Tensor::zeros({1})}}),
               std::invalid_argument);
}

}  // namespace
}  // namespace sprig
