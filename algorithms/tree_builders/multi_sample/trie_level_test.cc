// multi_sample's level bookkeeping: a worked example, and the device's
// answer (the kernel on CUDA) equal to the ATen reference on the CPU over
// random levels with many repeated draws.
#include "algorithms/tree_builders/multi_sample/trie_level.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/cuda_tests.h"
#include "tests/support/long_tensors.h"

namespace speclab::tree_builders {
namespace {

using testing::LongTensor;
using testing::LongValues;

TEST(TrieLevelTest, RepeatedDrawsShareTheFirstDrawsNode) {
  const c10::Device device = testing::TestDevice();
  const int64_t k = 4, length = 3;
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor all_tokens = at::full({k * length}, 99, longs), all_parents = at::full({1 + k * length}, 99, longs);
  // Level 0: all children of the root; draws 0 and 2 coincide.
  TrieLevel root = RecordTrieLevel(LongTensor({5, 7, 5, 6}, device), at::Tensor(), 0, all_tokens, all_parents);
  EXPECT_EQ(LongValues(root.first), (std::vector<int64_t>{0, 1, 0, 3}));
  EXPECT_EQ(LongValues(root.node), (std::vector<int64_t>{1, 2, 1, 4}));
  // Level 1: the same token under different parents stays apart.
  TrieLevel next = RecordTrieLevel(LongTensor({3, 3, 3, 8}, device), root.node, 1, all_tokens, all_parents);
  EXPECT_EQ(LongValues(next.first), (std::vector<int64_t>{0, 1, 0, 3}));
  EXPECT_EQ(LongValues(next.node), (std::vector<int64_t>{5, 6, 5, 8}));
  EXPECT_EQ(LongValues(all_tokens), (std::vector<int64_t>{5, 7, 5, 6, 3, 3, 3, 8, 99, 99, 99, 99}));
  EXPECT_EQ(LongValues(all_parents), (std::vector<int64_t>{-1, 0, 0, 0, 0, 1, 2, 1, 4, 99, 99, 99, 99}));
}

TEST(TrieLevelTest, TheDevicesAnswerIsTheReferences) {
  const c10::Device device = testing::TestDevice();
  at::Generator generator = at::detail::createCPUGenerator(3);
  for (int64_t k : {1, 2, 8, 33, 256}) {
    const int64_t length = 3;
    const auto longs = at::TensorOptions().dtype(at::kLong);
    const at::Tensor tokens_on_host = at::empty({k * length}, longs), parents_on_host = at::empty({1 + k * length}, longs);
    const at::Tensor tokens_on_device = tokens_on_host.to(device), parents_on_device = parents_on_host.to(device);
    at::Tensor host_nodes, device_nodes;
    for (int64_t level = 0; level < length; ++level) {
      // Few distinct tokens, so that draws repeat under the same parent.
      const at::Tensor tokens = at::randint(3, {k}, generator, longs);
      const TrieLevel host = RecordTrieLevelAten(tokens, host_nodes, level, tokens_on_host, parents_on_host);
      const TrieLevel on_device =
          RecordTrieLevel(tokens.to(device), device_nodes, level, tokens_on_device, parents_on_device);
      EXPECT_EQ(LongValues(on_device.first), LongValues(host.first)) << "k " << k << ", level " << level;
      EXPECT_EQ(LongValues(on_device.node), LongValues(host.node)) << "k " << k << ", level " << level;
      host_nodes = host.node;
      device_nodes = on_device.node;
    }
    EXPECT_EQ(LongValues(tokens_on_device), LongValues(tokens_on_host)) << "k " << k;
    EXPECT_EQ(LongValues(parents_on_device), LongValues(parents_on_host)) << "k " << k;
  }
}

}  // namespace
}  // namespace speclab::tree_builders
