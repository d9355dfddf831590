// multi_sample grown on the device (a model drafter's DraftLevels): the
// trie's layout (sequence_trie.h) worked out there: 1 + k * length nodes,
// each draw a child of the first node of the level before that holds its
// sequence's prefix, siblings in sequence order sharing one q row exactly,
// and distinct root draws without replacement. (Its law: TreeLawTest.)
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace {

using testing::ModelDrafterMethod;
using testing::TinyModel;

const std::vector<int32_t> kContext = {1, 5, 3, 7, 2};

TEST(MultiSampleLevels, DrawsFormTheSequenceTrieOnTheDevice) {
  for (bool replacement : {true, false}) {
    const int k = 4, length = 3;
    // A flat drafter (logit scale 1) so that draws often repeat and the trie merges.
    Method method = ModelDrafterMethod(TinyModel(3, 16, 1, replacement ? 1 : 30),
                                       absl::StrCat("{type: multi_sample, k: ", k, ", replacement: ",
                                                    replacement ? "true" : "false", "}"),
                                       replacement ? "{type: specinfer}" : "{type: rrs_wor}", length);
    at::Generator generator = at::detail::createCPUGenerator(7);
    int merged = 0;
    for (int trial = 0; trial < 20; ++trial) {
      ASSERT_TRUE(method.drafter->Reset(kContext, {}).ok());
      ASSERT_TRUE(method.drafter->BeginStep(kContext).ok());
      const BuildRequest request{.root_token = kContext.back(), .sampling = {.temperature = 1},
                                 .policy = method.policy.get(), .generator = &generator};
      auto draft = method.tree_builder->Build(*method.drafter, request);
      ASSERT_TRUE(draft.ok()) << draft.status();
      ASSERT_TRUE(draft->device_shape.has_value()) << "grown on the device";
      ASSERT_TRUE(ReadShape(*draft).ok());
      const TokenTree& tree = draft->tree;
      ASSERT_EQ(tree.size(), 1 + k * length);
      const at::Tensor tokens = draft->tokens.to(at::kCPU), q = draft->draft_probs.to(at::kCPU);
      for (int node = 0; node < tree.size(); ++node) {
        const std::vector<int>& children = tree.children(node);
        std::map<int64_t, int> first_with;  // token -> the first child carrying it
        for (int c : children) {
          EXPECT_TRUE(at::equal(q[c], q[children.front()])) << "siblings share their q row";
          EXPECT_GT(q[c][tokens[c].item<int64_t>()].item<float>(), 0.0f);
          auto [at, fresh] = first_with.emplace(tokens[c].item<int64_t>(), c);
          if (!fresh) {
            EXPECT_TRUE(tree.children(c).empty()) << "a repeated draw stays behind as a leaf";
            ++merged;
          }
        }
        if (!replacement && node == 0) EXPECT_EQ(first_with.size(), children.size()) << "distinct root draws";
      }
      for (int depth = 1; depth <= length; ++depth) {
        int at_depth = 0;
        for (int node = 1; node < tree.size(); ++node) at_depth += tree.depth(node) == depth;
        EXPECT_EQ(at_depth, k) << "one draw a sequence a level";
      }
    }
    if (replacement) EXPECT_GT(merged, 0) << "no sequences merged: the test would not exercise the trie";
  }
}

}  // namespace
}  // namespace speclab
