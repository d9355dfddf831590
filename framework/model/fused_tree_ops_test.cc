// fused::TreeMask, the pipelined tree step's TreeAtInputs,
// MovePathEntries and AdvanceTreeRoot, the pipelined chain step's
// AdvanceChainRoot and CutChainAnswer, and a chain in rounds' AdvanceRound: their contracts on the CPU, and the
// kernels (cuda/tree_kernels.h, cuda/row_kernels.h) on CUDA against the CPU.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "framework/model/fused_ops.h"
#include "tests/support/cuda_tests.h"

namespace speclab {
namespace {

at::Tensor Longs(const std::vector<int64_t>& v) { return at::tensor(v, at::kLong); }

// A sample-then-match walk's answer (verifiers::TreeWalk's layout): the
// accepted count, the accepted nodes, zeros, then y where the walk stopped.
at::Tensor HostWalk(const std::vector<int64_t>& parents, const at::Tensor& tokens, const at::Tensor& y) {
  const int64_t n = static_cast<int64_t>(parents.size());
  std::vector<int64_t> out(n + 1, 0);
  int64_t node = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (parents[i] == node && tokens[i].item<int64_t>() == y[node].item<int64_t>()) {
      out[++out[0]] = i;
      node = i;
    }
  }
  out[n] = y[node].item<int64_t>();
  return Longs(out);
}

TEST(FusedTreeOps, TreeMaskMarksEachNodesAncestors) {
  //      0
  //    1   2
  //    3     4
  //    5
  auto [mask, depths] = fused::TreeMask(Longs({-1, 0, 0, 1, 2, 3}));
  const std::vector<std::vector<int>> expected = {{1, 0, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 0}, {1, 0, 1, 0, 0, 0},
                                                  {1, 1, 0, 1, 0, 0}, {1, 0, 1, 0, 1, 0}, {1, 1, 0, 1, 0, 1}};
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(mask[i][j].item<bool>(), expected[i][j] == 1) << i << "," << j;
  EXPECT_TRUE(at::equal(depths, Longs({0, 1, 1, 2, 2, 3})));
}

// Parents -1, 0, 0, 2 (node 3 under node 2) as an ancestor mask.
at::Tensor SmallTreeMask() {
  return at::tensor({1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0, 1, 1}, at::kByte).view({4, 4}).to(at::kBool);
}

TEST(FusedTreeOps, TreeAtInputsPlacesTheTreeAtTheDevicesStart) {
  // Four nodes at start 3 in a bucket of 5 (one padding row), 8 KV columns
  // of a 10-column buffer.
  const at::Tensor buffer = at::full({5}, -1, at::kLong), slots = at::zeros({5}, at::kLong),
                   positions = at::zeros({5}, at::kLong), allowed_rows = at::ones({5, 10}, at::kBool);
  fused::TreeAtInputs(Longs({3}), Longs({5, 7, 8, 9}), Longs({0, 1, 1, 2}), SmallTreeMask(), buffer, slots, positions,
                      allowed_rows.narrow(1, 0, 8));
  EXPECT_TRUE(at::equal(buffer, Longs({5, 7, 8, 9, -1})));
  EXPECT_TRUE(at::equal(slots, Longs({3, 4, 5, 6, 7})));
  EXPECT_TRUE(at::equal(positions, Longs({3, 4, 4, 5, 3})));
  const std::vector<std::vector<int>> expected = {{1, 1, 1, 1, 0, 0, 0, 0}, {1, 1, 1, 1, 1, 0, 0, 0},
                                                  {1, 1, 1, 1, 0, 1, 0, 0}, {1, 1, 1, 1, 0, 1, 1, 0},
                                                  {1, 1, 1, 1, 0, 0, 0, 0}};
  for (int r = 0; r < 5; ++r) {
    for (int c = 0; c < 8; ++c) EXPECT_EQ(allowed_rows[r][c].item<bool>(), expected[r][c] == 1) << r << "," << c;
    EXPECT_TRUE(allowed_rows[r][8].item<bool>() && allowed_rows[r][9].item<bool>()) << "row " << r << ": past kv_length";
  }
}

TEST(FusedTreeOps, MovePathEntriesMovesTheAcceptedPathDown) {
  // One layer, two heads, 8 slots of 2 values: each entry holds its slot
  // (k) or minus its slot (v). The tree starts at slot 2; nodes 2 and 4 were
  // accepted, so slots 4 and 6 move to 3 and 4.
  const at::Tensor base = at::arange(8, at::kFloat).view({1, 1, 8, 1}).expand({1, 2, 8, 2}).contiguous();
  const at::Tensor k = base.clone(), v = -base;
  fused::MovePathEntries(k, v, Longs({2}), Longs({2, 4, 0}));
  for (const auto& [cache, sign] : {std::make_pair(k, 1.0f), std::make_pair(v, -1.0f)}) {
    const std::vector<float> expected = {0, 1, 2, 4, 6};
    for (int slot = 0; slot < 5; ++slot)
      EXPECT_TRUE(at::all(cache.select(2, slot) == sign * expected[slot]).item<bool>()) << "slot " << slot;
    EXPECT_TRUE(at::all(cache.select(2, 6) == sign * 6).item<bool>());
  }
}

TEST(FusedTreeOps, AdvanceTreeRootWritesThePathAndTheNextRoot) {
  const at::Tensor tokens = Longs({5, 7, 8, 9}), parents = Longs({-1, 0, 0, 2});
  // The root (token 5) at position 10; nodes 2 and 3 accepted, then token 11.
  at::Tensor context = at::zeros({20}, at::kLong);
  context[10] = 5;
  const at::Tensor walk = Longs({2, 2, 3, 0, 11});
  fused::TreeRootAdvance next = fused::AdvanceTreeRoot(walk, tokens, parents, Longs({9, 10}), context);
  EXPECT_TRUE(at::equal(context.narrow(0, 10, 4), Longs({5, 8, 9, 11})));
  EXPECT_TRUE(at::equal(next.positions, Longs({12, 13})));
  EXPECT_TRUE(at::equal(next.last_two, Longs({9, 11})));
  EXPECT_TRUE(at::equal(next.record, at::cat({tokens, parents, walk})));
  // The next step, rooted at token 11, accepts nothing: the extra token
  // follows the root, which comes before it.
  next = fused::AdvanceTreeRoot(Longs({0, 0, 0, 0, 4}), Longs({11, 7, 8, 9}), parents, next.positions, context);
  EXPECT_TRUE(at::equal(context.narrow(0, 13, 2), Longs({11, 4})));
  EXPECT_TRUE(at::equal(next.positions, Longs({13, 14})));
  EXPECT_TRUE(at::equal(next.last_two, Longs({11, 4})));
}

TEST(FusedTreeOps, PipelinedTreeKernelsMatchTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  at::Generator gen = at::detail::createCPUGenerator(5);
  const at::TensorOptions longs = at::TensorOptions().dtype(at::kLong);
  for (int64_t n : {1, 4, 16, 61, 128}) {
    std::vector<int64_t> parents{-1};
    for (int64_t i = 1; i < n; ++i) parents.push_back(at::randint(i, {1}, gen).item<int64_t>());
    auto [mask, depths] = fused::TreeMask(Longs(parents));
    const at::Tensor tokens = at::randint(1000, {n}, gen, longs);
    const int64_t bucket = n == 61 ? 64 : n, kv_length = 512;
    at::Tensor outputs[2][4];
    const int64_t launches = fused::CudaKernelLaunches();
    for (int d = 0; d < 2; ++d) {
      const c10::Device device = d == 0 ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA);
      outputs[d][0] = at::zeros({128}, longs.device(device));
      outputs[d][1] = at::zeros({bucket}, longs.device(device));
      outputs[d][2] = at::zeros({bucket}, longs.device(device));
      outputs[d][3] = at::zeros({128, 600}, at::TensorOptions().dtype(at::kBool).device(device));
      fused::TreeAtInputs(Longs({300}).to(device), tokens.to(device), depths.to(device), mask.to(device),
                          outputs[d][0], outputs[d][1], outputs[d][2],
                          outputs[d][3].narrow(0, 0, bucket).narrow(1, 0, kv_length));
    }
    EXPECT_EQ(fused::CudaKernelLaunches(), launches + 1) << "n " << n;
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(at::equal(outputs[1][i].cpu(), outputs[0][i])) << "n " << n << " " << i;

    // A walk down a random path, and the caches moved along it (bf16, 3 layers, 2 heads, head_dim 8).
    const at::Tensor walk = HostWalk(parents, tokens, tokens.index_select(0, at::randint(n, {n}, gen, longs)));
    const at::Tensor cache = at::randn({3, 2, 700, 8}, gen).to(at::kBFloat16);
    at::Tensor k[2] = {cache.clone(), cache.cuda()}, v[2] = {(-cache).contiguous(), (-cache).cuda()};
    at::Tensor context[2] = {at::arange(800, longs), at::arange(800, longs).cuda()};
    for (at::Tensor& tokens_by_position : context) tokens_by_position[300] = tokens[0];  // the root's token
    fused::TreeRootAdvance next[2];
    for (int d = 0; d < 2; ++d) {
      const c10::Device device = d == 0 ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA);
      if (n > 1) fused::MovePathEntries(k[d], v[d], Longs({300}).to(device), walk.narrow(0, 1, n - 1).to(device));
      next[d] = fused::AdvanceTreeRoot(walk.to(device), tokens.to(device), Longs(parents).to(device),
                                       Longs({299, 300}).to(device), context[d]);
    }
    // Equal up to the next root (the CPU's form also writes past it).
    const int64_t accepted = walk[0].item<int64_t>();
    const int64_t kept = 300 + accepted + 1;
    EXPECT_TRUE(at::equal(k[1].narrow(2, 0, kept).cpu(), k[0].narrow(2, 0, kept))) << "n " << n;
    EXPECT_TRUE(at::equal(v[1].narrow(2, 0, kept).cpu(), v[0].narrow(2, 0, kept))) << "n " << n;
    EXPECT_TRUE(at::equal(context[1].narrow(0, 0, kept + 1).cpu(), context[0].narrow(0, 0, kept + 1))) << "n " << n;
    EXPECT_TRUE(at::equal(next[1].positions.cpu(), next[0].positions)) << "n " << n;
    EXPECT_TRUE(at::equal(next[1].last_two.cpu(), next[0].last_two)) << "n " << n;
    EXPECT_TRUE(at::equal(next[1].record.cpu(), next[0].record)) << "n " << n;
  }
}

TEST(FusedTreeOps, AdvanceChainRootWritesTheDraftsAndTheNextRoot) {
  // The root (token 5) at position 10, drafts 6 7 8; two accepted, then token 11.
  at::Tensor context = at::zeros({20}, at::kLong);
  context[10] = 5;
  const at::Tensor tokens = Longs({5, 6, 7, 8});
  fused::ChainRootAdvance next = fused::AdvanceChainRoot(Longs({2, 11}), tokens, at::Tensor(), Longs({9, 10}), context);
  EXPECT_TRUE(at::equal(context.narrow(0, 10, 4), Longs({5, 6, 7, 11})));
  EXPECT_TRUE(at::equal(next.positions, Longs({12, 13})));
  EXPECT_TRUE(at::equal(next.last_two, Longs({7, 11})));
  EXPECT_TRUE(at::equal(next.record, Longs({3, 5, 6, 7, 8, 2, 11, 3})));
  // All three accepted, the stop having kept them all: the extra token follows them.
  next = fused::AdvanceChainRoot(Longs({3, 4}), Longs({11, 1, 2, 3}), Longs({3}), next.positions, context);
  EXPECT_TRUE(at::equal(context.narrow(0, 13, 5), Longs({11, 1, 2, 3, 4})));
  EXPECT_TRUE(at::equal(next.positions, Longs({16, 17})));
  EXPECT_TRUE(at::equal(next.last_two, Longs({3, 4})));
  EXPECT_TRUE(at::equal(next.record, Longs({3, 11, 1, 2, 3, 3, 4, 3})));
}

TEST(FusedTreeOps, PipelinedChainKernelMatchesTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  at::Generator gen = at::detail::createCPUGenerator(9);
  const at::TensorOptions longs = at::TensorOptions().dtype(at::kLong);
  for (int64_t g : {1, 2, 6, 31, 200}) {
    for (int64_t accepted : {int64_t{0}, g / 2, g}) {
      const at::Tensor tokens = at::randint(1000, {g + 1}, gen, longs);
      const at::Tensor answer = Longs({accepted, 77});
      at::Tensor context[2] = {at::arange(800, longs), at::arange(800, longs).cuda()};
      fused::ChainRootAdvance next[2];
      const int64_t launches = fused::CudaKernelLaunches();
      for (int d = 0; d < 2; ++d) {
        const c10::Device device = d == 0 ? c10::Device(c10::kCPU) : c10::Device(c10::kCUDA);
        const at::Tensor kept = g > 2 ? Longs({g - 1}).to(device) : at::Tensor();
        next[d] = fused::AdvanceChainRoot(answer.to(device), tokens.to(device), kept, Longs({299, 300}).to(device),
                                          context[d]);
      }
      EXPECT_EQ(fused::CudaKernelLaunches(), launches + 1) << "g " << g;
      EXPECT_TRUE(at::equal(context[1].cpu(), context[0])) << "g " << g << ", accepted " << accepted;
      EXPECT_TRUE(at::equal(next[1].positions.cpu(), next[0].positions)) << "g " << g;
      EXPECT_TRUE(at::equal(next[1].last_two.cpu(), next[0].last_two)) << "g " << g;
      EXPECT_TRUE(at::equal(next[1].record.cpu(), next[0].record)) << "g " << g;
    }
  }
}

TEST(FusedTreeOps, CutChainAnswerKeepsTheVerdictBeforeTheCutAndDrawsAfterIt) {
  // Target rows after the root and after drafts 1 and 2; row 2's largest is
  // token 3, and token 1 where noise divides it.
  const at::Tensor rows = at::tensor({0.1f, 0.2f, 0.3f, 0.4f,  //
                                      0.4f, 0.3f, 0.2f, 0.1f,  //
                                      0.2f, 0.3f, 0.1f, 0.4f})
                              .reshape({3, 4});
  const at::Tensor noise = at::tensor({1.0f, 0.5f, 1.0f, 2.0f}).reshape({1, 4});
  // One of two kept drafts accepted: the verdict stands.
  EXPECT_TRUE(at::equal(fused::CutChainAnswer(Longs({1, 9}), Longs({2}), rows, at::Tensor()), Longs({1, 9})));
  EXPECT_TRUE(at::equal(fused::CutChainAnswer(Longs({1, 9}), Longs({2}), rows, noise), Longs({1, 9})));
  // Both kept drafts accepted (the verifier saw the dropped ones too): the
  // token after the second is drawn from row 2.
  EXPECT_TRUE(at::equal(fused::CutChainAnswer(Longs({2, 9}), Longs({2}), rows, at::Tensor()), Longs({2, 3})));
  EXPECT_TRUE(at::equal(fused::CutChainAnswer(Longs({2, 9}), Longs({2}), rows, noise), Longs({2, 1})));
  EXPECT_TRUE(at::equal(fused::CutChainAnswer(Longs({2, 9}), Longs({1}), rows, at::Tensor()), Longs({1, 0})));
  EXPECT_THROW(fused::CutChainAnswer(Longs({2, 9}), Longs({1}), rows, at::ones({1, 3})), c10::Error);
}

TEST(FusedTreeOps, CutChainAnswerKernelMatchesTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  at::Generator gen = at::detail::createCPUGenerator(4);
  for (int64_t vocab : {5, 8000, 40000}) {
    for (int64_t g : {1, 4, 8}) {
      at::Tensor rows = at::rand({g + 1, vocab}, gen, at::kFloat);
      rows[g][vocab / 2] = rows[g].max();  // a tie: the first index wins
      const at::Tensor noise = at::empty({1, vocab}, at::kFloat).exponential_(1.0, gen);
      for (int64_t kept : {int64_t{1}, g}) {
        for (int64_t accepted : {int64_t{0}, kept - 1, kept, g}) {
          for (bool sampled : {false, true}) {
            const at::Tensor answer = Longs({accepted, 77});
            const at::Tensor host =
                fused::CutChainAnswer(answer, Longs({kept}), rows, sampled ? noise : at::Tensor());
            const int64_t launches = fused::CudaKernelLaunches();
            const at::Tensor device = fused::CutChainAnswer(answer.cuda(), Longs({kept}).cuda(), rows.cuda(),
                                                            sampled ? noise.cuda() : at::Tensor());
            EXPECT_EQ(fused::CudaKernelLaunches(), launches + 1);
            EXPECT_TRUE(at::equal(device.cpu(), host))
                << "vocab " << vocab << ", g " << g << ", kept " << kept << ", accepted " << accepted
                << (sampled ? ", sampled" : ", greedy") << ": " << device.cpu() << " against " << host;
          }
        }
      }
    }
  }
}

// AdvanceRound over a chain of `steps` after a prefix of 2 at position 10,
// with 3 guesses a round: state, tokens, sequence and rows after the round.
struct RoundAfter {
  at::Tensor state, tokens, sequence, rows;
};
RoundAfter AdvanceRoundOn(c10::Device device, const std::vector<int64_t>& state, const std::vector<int64_t>& picks,
                          const std::vector<int64_t>& guesses, int64_t steps, bool later, bool with_rows) {
  RoundAfter out{.state = Longs(state).to(device), .tokens = at::full({2 + steps + 4}, -1, at::kLong).to(device),
                 .sequence = at::full({40}, -1, at::kLong).to(device)};
  at::Tensor block;
  if (with_rows) {
    block = at::arange(4 * 5, at::kFloat).reshape({4, 5}).to(device);
    out.rows = at::full({steps + 4, 5}, -1.0f, at::kFloat).to(device);
  }
  fused::AdvanceRound(Longs(picks).to(device), Longs(guesses).to(device), block, out.state, out.tokens, out.sequence,
                      out.rows, /*prefix=*/2, steps, later);
  return out;
}

TEST(FusedTreeOps, AdvanceRoundKeepsThePicksThroughTheMatchedGuesses) {
  // After two picks (p = 2, the last token 7 at offset 3, position 13): the
  // round's picks 4 5 6 9 against guesses 4 5 8 keep 4 5 6 (two matched, the
  // third missed), written after the chain's two and the position's token.
  const at::Tensor first = fused::FirstRoundState(Longs({3, 7}), 2, Longs({10}), 6, 3);
  EXPECT_TRUE(at::equal(first, Longs({0, 0, 7, 1, 11, 0, 1, 2, 3})));
  const RoundAfter after = AdvanceRoundOn(c10::kCPU, {2, 1, 7, 3, 13, 2, 3, 4, 5}, {4, 5, 6, 9}, {4, 5, 8}, 6,
                                          /*later=*/true, /*with_rows=*/true);
  EXPECT_TRUE(at::equal(after.state, Longs({5, 2, 6, 6, 16, 5, 5, 5, 5}))) << after.state;
  EXPECT_TRUE(at::equal(after.tokens.narrow(0, 4, 4), Longs({4, 5, 6, 9})));
  EXPECT_TRUE(at::equal(after.sequence.narrow(0, 14, 4), Longs({4, 5, 6, 9})));
  EXPECT_TRUE(at::equal(after.rows.narrow(0, 2, 4), at::arange(20, at::kFloat).reshape({4, 5})));
  // Cut at the chain's end (one pick left), and none once complete.
  const RoundAfter cut =
      AdvanceRoundOn(c10::kCPU, {5, 2, 6, 6, 16, 5, 5, 5, 5}, {1, 2, 3, 4}, {1, 2, 3}, 6, true, false);
  EXPECT_TRUE(at::equal(cut.state, Longs({6, 3, 1, 7, 17, 5, 5, 5, 5}))) << cut.state;
  const RoundAfter done =
      AdvanceRoundOn(c10::kCPU, {6, 3, 1, 7, 17, 5, 5, 5, 5}, {1, 2, 3, 4}, {1, 2, 3}, 6, true, false);
  EXPECT_TRUE(at::equal(done.state, Longs({6, 3, 1, 7, 17, 5, 5, 5, 5}))) << done.state;
}

TEST(FusedTreeOps, AdvanceRoundKernelMatchesTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  const std::vector<std::vector<int64_t>> states = {{0, 0, 7, 1, 11, 0, 1, 2, 3}, {2, 1, 7, 3, 13, 2, 3, 4, 5},
                                                    {5, 2, 6, 6, 16, 5, 5, 5, 5}, {6, 3, 1, 7, 17, 5, 5, 5, 5}};
  const std::vector<std::vector<int64_t>> picks = {{4, 5, 6, 9}, {1, 5, 6, 9}, {4, 5, 8, 2}, {0, 0, 0, 0}};
  for (const auto& state : states) {
    for (const auto& pick : picks) {
      for (bool later : {false, true}) {
        for (bool with_rows : {false, true}) {
          const RoundAfter cpu = AdvanceRoundOn(c10::kCPU, state, pick, {4, 5, 8}, 6, later, with_rows);
          const int64_t launches = fused::CudaKernelLaunches();
          const RoundAfter cuda = AdvanceRoundOn(c10::kCUDA, state, pick, {4, 5, 8}, 6, later, with_rows);
          EXPECT_EQ(fused::CudaKernelLaunches(), launches + (with_rows ? 2 : 1));
          EXPECT_TRUE(at::equal(cuda.state.cpu(), cpu.state)) << cuda.state << cpu.state;
          EXPECT_TRUE(at::equal(cuda.tokens.cpu(), cpu.tokens));
          EXPECT_TRUE(at::equal(cuda.sequence.cpu(), cpu.sequence));
          if (with_rows) EXPECT_TRUE(at::equal(cuda.rows.cpu(), cpu.rows));
        }
      }
    }
  }
}

TEST(FusedTreeOps, CudaTreeMaskMatchesTheCpu) {
  SPECLAB_SKIP_UNLESS_CUDA();
  at::Generator gen = at::detail::createCPUGenerator(3);
  for (int64_t n : {1, 7, 84, 341, 1024}) {
    // A random tree: each node's parent an earlier node.
    std::vector<int64_t> parents{-1};
    for (int64_t i = 1; i < n; ++i) parents.push_back(at::randint(i, {1}, gen).item<int64_t>());
    auto [mask, depths] = fused::TreeMask(Longs(parents).cuda());
    auto [expected_mask, expected_depths] = fused::TreeMask(Longs(parents));
    EXPECT_TRUE(at::equal(mask.cpu(), expected_mask)) << "n " << n;
    EXPECT_TRUE(at::equal(depths.cpu(), expected_depths)) << "n " << n;
  }
}

}  // namespace
}  // namespace speclab
