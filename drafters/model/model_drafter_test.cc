// The model drafter with a vocabulary of its own, mapped onto the target's.
#include "drafters/model/model_drafter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "framework/core/file_util.h"
#include "framework/speculative_decoder.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace {

using ::speclab::testing::MethodFromYaml;
using ::speclab::testing::TinyModel;
using ::testing::HasSubstr;

class VocabularyMapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test process: ctest runs these tests in parallel.
    dir_ = ::testing::TempDir() + "/vocab_map_test_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    RemoveTree(dir_);
    target_ = TinyModel(1, /*vocab=*/16);
    // A drafter with 20 tokens: ids 0..15 are a permutation of the target's,
    // 16..19 have no target counterpart.
    ASSERT_TRUE(TinyModel(2, /*vocab=*/20)->Save(dir_ + "/drafter", at::kFloat).ok());
    std::ofstream map(dir_ + "/map.yaml");
    map << "d2t: [";
    for (int d = 0; d < 20; ++d) map << (d ? ", " : "") << (d < 16 ? (d * 7) % 16 : -1);
    map << "]\nunknown: 19\n";
  }
  void TearDown() override { RemoveTree(dir_); }

  std::string Method(const std::string& extra) {
    return "{name: m, drafter: {type: model, path: " + dir_ + "/drafter" + extra +
           "}, verifier: {type: rejection}, length_policy: {type: fixed, gamma: 3}}";
  }

  std::string dir_;
  std::unique_ptr<LlamaModel> target_;
};

TEST_F(VocabularyMapTest, MappedDrafterIsExactAtTemperatureZero) {
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2};
  DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 30, .time_phases = false};
  auto greedy = GenerateAutoregressive(*target_, prompt, options);
  auto method = MethodFromYaml(Method(", vocab_map: " + dir_ + "/map.yaml"), target_.get());
  ASSERT_TRUE(method.ok()) << method.status();
  auto out = GenerateSpeculative(*target_, *method, prompt, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens, greedy->tokens);
}

TEST_F(VocabularyMapTest, DifferentVocabulariesWithoutAMapAreRefused) {
  auto method = MethodFromYaml(Method(""), target_.get());
  ASSERT_FALSE(method.ok());
  EXPECT_THAT(method.status().message(), HasSubstr("drafter vocabulary (20 tokens) differs from the target's (16)"));
  EXPECT_THAT(method.status().message(), HasSubstr("vocab_map"));
}

TEST_F(VocabularyMapTest, BadMapsNameTheKey) {
  std::ofstream(dir_ + "/twice.yaml") << "d2t: [0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, -1, -1, -1, -1]\n";
  auto twice = MethodFromYaml(Method(", vocab_map: " + dir_ + "/twice.yaml"), target_.get());
  EXPECT_THAT(twice.status().message(), HasSubstr("target id 0 is mapped twice"));
  std::ofstream(dir_ + "/short.yaml") << "d2t: [0, 1]\n";
  auto short_map = MethodFromYaml(Method(", vocab_map: " + dir_ + "/short.yaml"), target_.get());
  EXPECT_THAT(short_map.status().message(), HasSubstr("has 2 entries; the drafter has 20 tokens"));
}

}  // namespace
}  // namespace speclab
