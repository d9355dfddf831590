#include "framework/model/safetensors.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / absl::StrCat("speclab_safetensors_", ::getpid());
  fs::create_directories(dir);
  return (dir / name).string();
}

// A file with a hand-written header, for malformed and unusual layouts.
void WriteRaw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i, n >>= 8) out.put(static_cast<char>(n & 0xff));
  out << header << data;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ca = a.contiguous();
  const at::Tensor cb = b.contiguous();
  return ca.scalar_type() == cb.scalar_type() && ca.sizes() == cb.sizes() &&
         std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

TEST(SafetensorsTest, RoundTripsEveryDtypeAndShape) {
  at::manual_seed(0);
  std::map<std::string, at::Tensor> tensors = {
      {"f32", at::randn({3, 5})},
      {"f16", at::randn({7}).to(at::kHalf)},
      {"bf16", at::randn({2, 3, 4}).to(at::kBFloat16)},
      {"i64", at::arange(-5, 6, at::kLong)},
      {"i32", at::arange(0, 9, at::kInt).view({3, 3})},
      {"scalar", at::scalar_tensor(2.5)},
      {"empty", at::zeros({0, 4})},
      {"strided", at::randn({4, 6}).t()},  // written contiguous
  };
  const std::string path = TempPath("round_trip.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    ASSERT_TRUE(read->count(name)) << name;
    EXPECT_TRUE(SameBytes(read->at(name), tensor)) << name;
  }
}

TEST(SafetensorsTest, Bf16BytesAreBitExact) {
  at::manual_seed(1);
  const at::Tensor original = (at::randn({64, 33}) * 1000).to(at::kBFloat16);
  const std::string path = TempPath("bf16.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"w", original}}).ok());
  // The data region of the file holds exactly the tensor's bytes.
  const std::string file = ReadBytes(path);
  const size_t bytes = original.numel() * 2;
  ASSERT_GE(file.size(), bytes);
  EXPECT_EQ(std::memcmp(file.data() + file.size() - bytes, original.data_ptr(), bytes), 0);
  auto read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(SameBytes(read->at("w"), original));
}

TEST(SafetensorsTest, IgnoresMetadataAndHandlesUnalignedOffsets) {
  // Three F16 values (6 bytes), then an F32 at offset 6: not 4-byte aligned.
  const at::Tensor half = at::tensor({1.0, 2.0, 3.0}).to(at::kHalf);
  const at::Tensor single = at::tensor({4.5f, -1.25f});
  std::string data(static_cast<const char*>(half.data_ptr()), 6);
  data.append(static_cast<const char*>(single.data_ptr()), 8);
  const std::string path = TempPath("unaligned.safetensors");
  WriteRaw(path,
           R"({"__metadata__":{"format":"pt","note":"x"},)"
           R"("a":{"dtype":"F16","shape":[3],"data_offsets":[0,6]},)"
           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[6,14]}}  )",
           data);
  auto read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->size(), 2u);
  EXPECT_TRUE(SameBytes(read->at("a"), half));
  EXPECT_TRUE(SameBytes(read->at("b"), single));
}

TEST(SafetensorsTest, MissingFileNamesPath) {
  const std::string path = TempPath("does_not_exist.safetensors");
  auto read = ReadSafetensors(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find(path), std::string::npos) << read.status();
}

TEST(SafetensorsTest, TruncatedFileFails) {
  const std::string path = TempPath("truncated.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"w", at::randn({100})}}).ok());
  const std::string full = ReadBytes(path);
  for (size_t keep : {size_t{0}, size_t{5}, size_t{20}, full.size() - 4}) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << full.substr(0, keep);
    auto read = ReadSafetensors(path);
    ASSERT_FALSE(read.ok()) << keep;
    EXPECT_NE(read.status().message().find(path), std::string::npos) << read.status();
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << full.substr(0, full.size() - 4);
  auto read = ReadSafetensors(path);
  EXPECT_NE(read.status().message().find("'w'"), std::string::npos) << read.status();
}

TEST(SafetensorsTest, BadHeadersFailWithClearMessages) {
  const std::string path = TempPath("bad.safetensors");
  const std::string data(16, '\0');
  struct Case {
    std::string header;
    std::string expect;
  };
  const Case cases[] = {
      {"{not json", "bad header"},
      {"[1, 2]", "bad header"},
      {R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,32]}})", "out of range"},
      {R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,4]}})", "out of range"},
      {R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", "need 12"},
      {R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})", "unsupported dtype 'F64'"},
      {R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", "shape"},
      {R"({"w":{"dtype":"F32","shape":[4]}})", "missing data_offsets"},
      // Strict JSON: YAML's unquoted keys and trailing commas are not JSON.
      {R"({w: {"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "malformed JSON"},
      {R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},})", "malformed JSON"},
      {R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,16]}})", "shape must be a non-negative integer"},
      {R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"dtype":"F16"}})", "key 'dtype' appears twice"},
      // Found by tests/fuzz/fuzz_safetensors_header.cc: three known keys, one twice, one missing.
      {R"({"w":{"dtype":"F32","dtype":[4],"data_offsets":[0,16]}})", "key 'dtype' appears twice"},
      {R"({"w":{"dtype":"F32","data_offsets":[0,16]}})", "missing shape"},
      {R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"offsets":[0,0]}})", "unknown key 'offsets'"},
      {R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       "tensor 'w' appears twice"},
      // Two tensors sharing bytes would alias each other's weights.
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
       "tensors 'a' [0, 12) and 'b' [8, 16) overlap"},
  };
  for (const Case& c : cases) {
    WriteRaw(path, c.header, data);
    auto read = ReadSafetensors(path);
    ASSERT_FALSE(read.ok()) << c.header;
    EXPECT_NE(read.status().message().find(path), std::string::npos) << read.status();
    EXPECT_NE(read.status().message().find(c.expect), std::string::npos) << read.status();
  }
  // A header length beyond the file.
  std::ofstream(path, std::ios::binary | std::ios::trunc) << std::string("\xff\x00\x00\x00\x00\x00\x00\x00{}", 10);
  auto read = ReadSafetensors(path);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("truncated"), std::string::npos) << read.status();
}

TEST(SafetensorsTest, RefusesUnsupportedDtypeOnWrite) {
  const std::string path = TempPath("f64.safetensors");
  absl::Status status = WriteSafetensors(path, {{"d", at::zeros({2}, at::kDouble)}});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("'d'"), std::string::npos) << status;
}

// A large file is read with one read into one buffer, its tensors views into
// it (no copy per tensor): the second tensor's data starts where the first's
// ends. (How fast that is is a benchmark's question, not a test's.)
TEST(SafetensorsTest, ReadsALargeFileIntoOneBuffer) {
  const at::Tensor big = at::ones({16 << 20});  // 64 MB
  const std::string path = TempPath("big.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"a", big.narrow(0, 0, 8 << 20)}, {"b", big.narrow(0, 0, 8 << 20)}}).ok());
  auto read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  const at::Tensor& a = read->at("a");
  const at::Tensor& b = read->at("b");
  EXPECT_EQ(b.numel(), 8 << 20);
  const char* a_data = static_cast<const char*>(a.data_ptr());
  const char* b_data = static_cast<const char*>(b.data_ptr());
  EXPECT_EQ(std::abs(b_data - a_data), static_cast<std::ptrdiff_t>(a.nbytes()));
  EXPECT_TRUE(at::equal(b, big.narrow(0, 0, 8 << 20)));
  fs::remove(path);
}

}  // namespace
}  // namespace speclab
