// The device form of shape drafting (shape_levels.h) against the host's
// (shape_drafting.h): the same top-k tree, node for node, from a model
// drafter; and sampled trees whose ranks are distinct draws from q (their law
// is checked end to end by tests/tree_decoding_test.cc's TreeLawTest).
#include "algorithms/tree_builders/common/shape_levels.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "algorithms/tree_builders/common/shape_drafting.h"
#include "tests/support/tiny_models.h"

namespace speclab {
namespace {

using testing::ModelDrafterMethod;
using testing::TinyModel;

const std::vector<int32_t> kContext = {1, 5, 3, 7, 2};
const std::vector<std::vector<int64_t>> kChoices = {{0}, {1}, {2}, {0, 0}, {0, 1}, {1, 0}, {0, 0, 0}, {1, 0, 0}};

// The draft tree's tokens and parents, read back (the shape is on the device).
std::pair<std::vector<int64_t>, std::vector<int>> Read(DraftTree draft) {
  EXPECT_TRUE(ReadShape(draft).ok());
  const at::Tensor tokens = draft.tokens.to(at::kCPU);
  std::vector<int> parents;
  for (int i = 0; i < draft.tree.size(); ++i) parents.push_back(draft.tree.parent(i));
  return {std::vector<int64_t>(tokens.data_ptr<int64_t>(), tokens.data_ptr<int64_t>() + tokens.numel()), parents};
}

// A drafter at kContext, ready for a step.
Method DrafterAtContext(uint64_t seed) {
  Method method = ModelDrafterMethod(TinyModel(seed), "{type: chain}", "{type: point_mass}", 2);
  EXPECT_TRUE(method.drafter->Reset(kContext, {}).ok());
  EXPECT_TRUE(method.drafter->BeginStep(kContext).ok());
  return method;
}

TEST(ShapeLevels, TopKTreeEqualsTheHostDraft) {
  auto shape = tree_builders::ShapeFromChoices(kChoices);
  ASSERT_TRUE(shape.ok());
  const BuildRequest request{.root_token = kContext.back(), .sampling = {.temperature = 0}};
  Method on_device = DrafterAtContext(3), on_host = DrafterAtContext(3);
  tree_builders::ShapeLevels levels(*shape, /*sample_without_replacement=*/true);  // top-k at T = 0
  auto grown = levels.Draft(*on_device.drafter, request, "test");
  ASSERT_TRUE(grown.ok()) << grown.status();
  ASSERT_TRUE(grown->has_value()) << "the model drafter grows levels on the device";
  EXPECT_TRUE((*grown)->device_shape.has_value());
  auto host = tree_builders::DraftShape(*on_host.drafter, request, *shape, true, "test");
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(Read(**grown), Read(*host));
}

TEST(ShapeLevels, SampledRanksAreDistinctDrawsWithTheirParentsRows) {
  auto shape = tree_builders::ShapeFromChoices(kChoices);
  ASSERT_TRUE(shape.ok());
  at::Generator generator = at::detail::createCPUGenerator(5);
  const BuildRequest request{.root_token = kContext.back(), .sampling = {.temperature = 1}, .generator = &generator};
  tree_builders::ShapeLevels levels(*shape, /*sample_without_replacement=*/true);
  for (int trial = 0; trial < 20; ++trial) {
    Method method = DrafterAtContext(3);
    auto grown = levels.Draft(*method.drafter, request, "test");
    ASSERT_TRUE(grown.ok() && grown->has_value()) << grown.status();
    const DraftTree& draft = **grown;
    EXPECT_EQ(draft.sampling, DraftSampling::kWithoutReplacement);
    ASSERT_EQ(draft.draft_probs.size(0), shape->size());
    const auto [tokens, parents] = Read(draft);
    const at::Tensor q = draft.draft_probs.to(at::kCPU);
    for (int node = 0; node < shape->size(); ++node) {
      std::set<int64_t> siblings;
      for (int c : shape->children(node)) {
        EXPECT_EQ(parents[c], node);
        EXPECT_TRUE(siblings.insert(tokens[c]).second) << "rank " << shape->rank(c) << " repeats a token";
        EXPECT_GT(q[c][tokens[c]].item<float>(), 0.0f);  // q is the parent's row, which drew it
        EXPECT_TRUE(at::equal(q[c], q[shape->children(node).front()]));  // one row for all siblings
      }
    }
  }
}

}  // namespace
}  // namespace speclab
