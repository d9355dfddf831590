// The multi-sample layout (sequence_trie.h) and, by exact enumeration
// (docs/algorithms.md §0.4), the law it gives under every verifier that
// takes i.i.d. or without-replacement multi-drafts.
#include "algorithms/tree_builders/multi_sample/sequence_trie.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "algorithms/verifiers/common/distribution.h"
#include "algorithms/verifiers/testing/choice_enumerator.h"
#include "algorithms/verifiers/testing/law_check.h"
#include "algorithms/verifiers/testing/table_model.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace tree_builders {
namespace {

using ::testing::ElementsAre;

TEST(SequenceTrieTest, KeepsRepeatedDrawsAsLeavesAndMergesPrefixes) {
  SequenceTrie trie(/*root_token=*/9, /*sequences=*/4);
  EXPECT_THAT(trie.Frontier(), ElementsAre(0));
  // Level 1: sequences draw 5, 7, 5, 5.
  auto parents = trie.Extend({{5, 7, 5, 5}});
  ASSERT_TRUE(parents.ok()) << parents.status();
  EXPECT_THAT(*parents, ElementsAre(0, 0, 0, 0));
  const TokenTree& tree = trie.tree();
  EXPECT_THAT(tree.children(0), ElementsAre(1, 2, 3, 4));  // every draw is a child
  EXPECT_THAT(trie.Frontier(), ElementsAre(1, 2));        // the three 5s continue from node 1
  EXPECT_THAT(trie.SequencesAt(1), ElementsAre(0, 2, 3));
  // Level 2: node 1's sequences draw 6, 6, 8; node 2's draws 7.
  ASSERT_TRUE(trie.Extend({{6, 6, 8}, {7}}).ok());
  EXPECT_THAT(tree.children(1), ElementsAre(5, 6, 7));
  EXPECT_THAT(tree.children(2), ElementsAre(8));
  EXPECT_TRUE(tree.children(3).empty() && tree.children(4).empty());
  EXPECT_EQ(tree.size(), 1 + 4 + 4);  // k * length drafts, always
  EXPECT_THAT(trie.Frontier(), ElementsAre(5, 7, 8));
}

TEST(SequenceTrieTest, FewerDrawsEndTheSurplusSequences) {
  SequenceTrie trie(0, 3);
  ASSERT_TRUE(trie.Extend({{4, 2}}).ok());  // q had only two tokens
  EXPECT_EQ(trie.live_sequences(), 2);
  EXPECT_FALSE(trie.Extend({{1, 1}, {2}}).ok()) << "more draws than sequences";
}

// ---- Exact law of drafting + verification ----------------------------------

struct LawCase {
  std::string verifier;
  bool replacement = true;
  int sequences = 2;
  int length = 2;
  int vocab = 3;
  uint64_t seed = 1;
  bool deduplicate = false;  // negative control: one child per distinct token
};

// Draws the layout with `random` from table rows, as the builder does on the device.
absl::StatusOr<enumeration::DraftedTree> DraftTrie(const LawCase& c, const enumeration::TableModel& draft,
                                                   RandomSource& random) {
  SequenceTrie trie(/*root_token=*/0, c.sequences);
  std::vector<std::vector<double>> rows{{}};
  for (int depth = 0; depth < c.length; ++depth) {
    const std::vector<int> frontier = trie.Frontier();
    std::vector<std::vector<int32_t>> draws(frontier.size());
    for (size_t f = 0; f < frontier.size(); ++f) {
      const std::vector<double>& q = draft.Row(trie.tree().PathTokens(frontier[f]));
      std::vector<int> taken;
      for (size_t s = 0; s < trie.SequencesAt(frontier[f]).size(); ++s) {
        std::vector<double> law = c.replacement ? q : verifiers::MaskedRow(q, taken);
        if (verifiers::Sum(law) <= 0) break;  // without replacement: support exhausted
        const int token = random.Categorical(law);
        taken.push_back(token);
        draws[f].push_back(token);
      }
      if (c.deduplicate) {
        std::vector<int32_t> distinct;
        for (int32_t t : draws[f])
          if (std::find(distinct.begin(), distinct.end(), t) == distinct.end()) distinct.push_back(t);
        draws[f] = distinct;
      }
    }
    ASSIGN_OR_RETURN(std::vector<int> parents, trie.Extend(draws));
    for (int p : parents) rows.push_back(draft.Row(trie.tree().PathTokens(frontier[p])));
  }
  enumeration::DraftedTree out;
  out.tree = trie.tree();
  out.rows = rows;
  return out;
}

// max |error| of the emitted law against the target's (§0.4).
absl::StatusOr<double> LawError(const LawCase& c) {
  enumeration::TableModel target({.vocab = c.vocab, .seed = c.seed});
  enumeration::TableModel draft({.vocab = c.vocab, .seed = c.seed + 100, .concentration = 0.7});
  Options spec = *Options::FromString("{type: " + c.verifier + "}", "test.yaml");
  ASSIGN_OR_RETURN(std::unique_ptr<Verifier> verifier, VerifierRegistry::Create(spec, "verifier"));
  enumeration::SequenceLaw law;
  std::vector<int32_t> emitted;
  auto run = [&](RandomSource& random) -> absl::Status {
    ASSIGN_OR_RETURN(enumeration::DraftedTree drafted, DraftTrie(c, draft, random));
    const TokenTree& tree = drafted.tree;
    VerificationProblem problem;
    problem.tree = &tree;
    problem.target = ProbabilityRows(tree.size(), c.vocab);
    problem.draft = ProbabilityRows(tree.size(), c.vocab);
    problem.target_argmax.resize(tree.size());
    for (int node = 0; node < tree.size(); ++node) {
      const std::vector<double>& p = target.Row(tree.PathTokens(node));
      std::copy(p.begin(), p.end(), problem.target.mutable_row(node).begin());
      problem.target_argmax[node] = static_cast<int32_t>(std::max_element(p.begin(), p.end()) - p.begin());
      if (node > 0) std::copy(drafted.rows[node].begin(), drafted.rows[node].end(), problem.draft.mutable_row(node).begin());
    }
    problem.sampling = c.replacement ? DraftSampling::kIndependent : DraftSampling::kWithoutReplacement;
    ASSIGN_OR_RETURN(Verdict verdict, verifier->Verify(problem, random));
    ASSIGN_OR_RETURN(emitted, enumeration::EmittedTokens(tree, verdict, c.vocab));
    return absl::OkStatus();
  };
  auto record = [&](double probability) {
    law[emitted] += probability;
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(enumeration::EnumerateChoices(run, record));
  ASSIGN_OR_RETURN(enumeration::LawComparison comparison,
                   enumeration::CompareWithTarget(law, target, /*root_token=*/0, c.length + 1));
  std::printf("[ trie law ] %-10s %s k=%d L=%d V=%d seed=%llu%s: max |error| %.3g, E[accepted] %.4f\n",
              c.verifier.c_str(), c.replacement ? "iid" : "w/o", c.sequences, c.length, c.vocab,
              static_cast<unsigned long long>(c.seed), c.deduplicate ? " (deduplicated)" : "",
              comparison.max_abs_error, comparison.expected_accepted);
  return comparison.max_abs_error;
}

TEST(SequenceTrieTest, IidLayoutIsExactForMultiDraftVerifiers) {
  for (const char* verifier : {"specinfer", "rrs", "spectr", "khisti", "traversal"}) {
    for (LawCase c : {LawCase{.sequences = 2, .length = 2, .vocab = 3, .seed = 1},
                      LawCase{.sequences = 3, .length = 2, .vocab = 3, .seed = 2},
                      LawCase{.sequences = 2, .length = 3, .vocab = 2, .seed = 3}}) {
      c.verifier = verifier;
      auto error = LawError(c);
      ASSERT_TRUE(error.ok()) << verifier << ": " << error.status();
      EXPECT_LT(*error, enumeration::LosslessTolerance()) << verifier << " k=" << c.sequences << " L=" << c.length;
    }
  }
}

TEST(SequenceTrieTest, WithoutReplacementLayoutIsExactForRrsWor) {
  for (LawCase c : {LawCase{.replacement = false, .sequences = 2, .length = 2, .vocab = 3, .seed = 4},
                    LawCase{.replacement = false, .sequences = 3, .length = 2, .vocab = 3, .seed = 5},
                    LawCase{.replacement = false, .sequences = 4, .length = 2, .vocab = 3, .seed = 6}}) {
    for (const char* verifier : {"rrs_wor", "traversal"}) {
      c.verifier = verifier;
      auto error = LawError(c);
      ASSERT_TRUE(error.ok()) << error.status();
      EXPECT_LT(*error, enumeration::LosslessTolerance()) << verifier << " k=" << c.sequences;
    }
  }
}

// Why repeated draws stay as leaves: merging them changes the law.
TEST(SequenceTrieTest, NegativeControlDeduplicatedTrieIsLossy) {
  double worst = 0;
  for (uint64_t seed : {1, 2, 3}) {
    auto error = LawError({.verifier = "specinfer", .sequences = 3, .length = 2, .vocab = 3, .seed = seed,
                           .deduplicate = true});
    ASSERT_TRUE(error.ok()) << error.status();
    worst = std::max(worst, *error);
  }
  EXPECT_GT(worst, 1e-4);  // lossy: four orders of magnitude above rounding
                           // (LosslessTolerance)
}

}  // namespace
}  // namespace tree_builders
}  // namespace speclab
