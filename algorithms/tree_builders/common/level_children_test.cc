// A fixed-shape level's gathers: a worked example, and the device's answer
// (the kernel on CUDA) equal to the ATen reference on the CPU, sampled or
// not, fed or last, at vocabularies that take the kernel's vector and scalar
// copies.
#include "algorithms/tree_builders/common/level_children.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/cuda_tests.h"
#include "tests/support/long_tensors.h"

namespace speclab::tree_builders {
namespace {

using testing::LongTensor;
using testing::LongValues;

TEST(LevelChildrenTest, ChildrenTakeTheirPlacesAndTheirParentsRows) {
  const c10::Device device = testing::TestDevice();
  // Two fed rows, three ranks each; children: row 0's ranks 0 and 1, row 1's rank 0.
  const at::Tensor by_rank = LongTensor({40, 41, 42, 50, 51, 52}, device);
  const at::Tensor q = at::arange(8, at::TensorOptions().dtype(at::kFloat)).view({2, 4}).to(device);
  const at::Tensor children = at::full({3}, -1, by_rank.options());
  const at::Tensor q_rows = at::full({3, 4}, -1.0f, q.options());
  const at::Tensor fed = GatherLevelChildren({.by_rank = by_rank, .flat = LongTensor({0, 1, 3}, device),
                                              .children = children, .q = q,
                                              .parent_rows = LongTensor({0, 0, 1}, device), .q_rows = q_rows,
                                              .feed = LongTensor({2, 0}, device), .width = 2});
  EXPECT_EQ(LongValues(children), (std::vector<int64_t>{40, 41, 50}));
  EXPECT_EQ(LongValues(fed), (std::vector<int64_t>{50, 40}));
  EXPECT_TRUE(at::equal(q_rows.cpu(), at::stack({q[0], q[0], q[1]}).cpu()));
  // The last level feeds zeros.
  const at::Tensor last = GatherLevelChildren({.by_rank = by_rank, .flat = LongTensor({5}, device),
                                               .children = children.narrow(0, 0, 1), .width = 3});
  EXPECT_EQ(LongValues(last), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(LongValues(children), (std::vector<int64_t>{52, 41, 50}));
}

TEST(LevelChildrenTest, TheDevicesAnswerIsTheReferences) {
  const c10::Device device = testing::TestDevice();
  at::Generator generator = at::detail::createCPUGenerator(5);
  const auto longs = at::TensorOptions().dtype(at::kLong);
  for (int64_t vocab : {7, 8000}) {
    for (bool sampled : {false, true}) {
      for (bool fed : {false, true}) {
        const std::string where = "vocab " + std::to_string(vocab) + (sampled ? " sampled" : "") + (fed ? " fed" : "");
        const int64_t rows = 5, span = 4, count = 9, width = 3;
        const at::Tensor by_rank = at::randint(vocab, {rows * span}, generator, longs);
        const at::Tensor flat = at::randint(rows * span, {count}, generator, longs);
        const at::Tensor parent_rows = at::randint(rows, {count}, generator, longs);
        const at::Tensor feed = at::randint(count, {width}, generator, longs);
        const at::Tensor q = at::rand({rows, vocab}, generator);
        LevelGather host{.by_rank = by_rank, .flat = flat, .children = at::empty({count}, longs),
                         .q = sampled ? q : at::Tensor(), .parent_rows = parent_rows,
                         .q_rows = sampled ? at::empty({count, vocab}) : at::Tensor(),
                         .feed = fed ? feed : at::Tensor(), .width = width};
        LevelGather on_device{.by_rank = by_rank.to(device), .flat = flat.to(device),
                              .children = at::empty({count}, longs.device(device)),
                              .q = sampled ? q.to(device) : at::Tensor(), .parent_rows = parent_rows.to(device),
                              .q_rows = sampled ? at::empty({count, vocab}, q.options().device(device)) : at::Tensor(),
                              .feed = fed ? feed.to(device) : at::Tensor(), .width = width};
        const at::Tensor want = GatherLevelChildrenAten(host), got = GatherLevelChildren(on_device);
        EXPECT_EQ(LongValues(got), LongValues(want)) << where;
        EXPECT_EQ(LongValues(on_device.children), LongValues(host.children)) << where;
        if (sampled) EXPECT_TRUE(at::equal(on_device.q_rows.cpu(), host.q_rows)) << where;
      }
    }
  }
}

}  // namespace
}  // namespace speclab::tree_builders
