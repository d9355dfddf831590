#include "tests/support/exact_enumeration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "algorithms/verifiers/testing/device_rule_adapter.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab {
namespace enumeration_test {
namespace {

using enumeration::DraftedTree;
using enumeration::InstanceModels;

std::string DescribeTree(const TokenTree& tree) {
  std::string out = "tree{";
  for (int i = 1; i < tree.size(); ++i) absl::StrAppend(&out, i > 1 ? " " : "", tree.parent(i), "->", tree.token(i));
  return out + "}";
}

// Duplicate sibling tokens whose subtrees may differ: there greedy's
// longest-path search can beat any top-down rule, so T=0 equality is only
// claimed for trees without them (or with one-hot q, which makes every
// duplicated subtree identical).
bool HasDuplicateSiblings(const TokenTree& tree) {
  for (int u = 0; u < tree.size(); ++u) {
    const std::vector<int>& children = tree.children(u);
    for (size_t i = 0; i < children.size(); ++i)
      for (size_t j = i + 1; j < children.size(); ++j)
        if (tree.token(children[i]) == tree.token(children[j])) return true;
  }
  return false;
}

std::string DescribeVerdict(const Verdict& verdict) {
  std::string out = "accepted[";
  for (size_t i = 0; i < verdict.accepted.size(); ++i) absl::StrAppend(&out, i ? "," : "", verdict.accepted[i]);
  return absl::StrCat(out, "] extra ", verdict.extra_token);
}

absl::StatusOr<std::unique_ptr<Verifier>> Create(const std::string& name, const std::string& yaml_options) {
  const auto* entry = VerifierRegistry::Find(name);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("no verifier '", name, "' registered"));
  auto options = Options::FromString(yaml_options, "<test>");
  if (!options.ok()) return options.status();
  auto verifier = entry->create(*options);
  if (!verifier.ok()) return verifier.status();
  if (auto unused = options->CheckAllUsed(); !unused.ok()) return unused;
  return verifier;
}

}  // namespace

std::unique_ptr<Verifier> MakeVerifier(const std::string& name, const std::string& yaml_options) {
  auto verifier = Create(name, yaml_options);
  if (!verifier.ok()) {
    ADD_FAILURE() << "creating verifier '" << name << "': " << verifier.status();
    return nullptr;
  }
  return *std::move(verifier);
}

absl::Status CreateStatus(const std::string& name, const std::string& yaml_options) {
  return Create(name, yaml_options).status();
}

Instance MakeInstance(std::vector<int> branching, int vocab, DraftMode mode, uint64_t seed) {
  Instance instance;
  instance.branching = std::move(branching);
  instance.mode = mode;
  instance.target = {.vocab = vocab, .seed = seed};
  instance.draft = {.vocab = vocab, .seed = seed * 7919 + 1};
  return instance;
}

std::vector<Instance> Catalogue(DraftMode mode, bool chains_only) {
  std::vector<Instance> out;
  for (uint64_t seed : {11u, 23u}) {
    out.push_back(MakeInstance({1}, 5, mode, seed));
    out.push_back(MakeInstance({1, 1}, 4, mode, seed));
    out.push_back(MakeInstance({1, 1, 1}, 3, mode, seed));
  }
  Instance peaked = MakeInstance({1, 1}, 4, mode, 37);
  peaked.target.concentration = peaked.draft.concentration = 0.3;
  out.push_back(peaked);
  Instance greedy_target = MakeInstance({1, 1, 1}, 3, mode, 41);
  greedy_target.target.one_hot = true;
  out.push_back(greedy_target);
  if (chains_only) return out;

  for (uint64_t seed : {11u, 23u}) {
    out.push_back(MakeInstance({2}, 5, mode, seed));
    out.push_back(MakeInstance({3}, 4, mode, seed));
    out.push_back(MakeInstance({2, 1}, 4, mode, seed));
    out.push_back(MakeInstance({1, 2}, 4, mode, seed));
    out.push_back(MakeInstance({2, 2}, 3, mode, seed));
  }
  Instance peaked_tree = MakeInstance({2, 1}, 4, mode, 37);
  peaked_tree.target.concentration = peaked_tree.draft.concentration = 0.3;
  out.push_back(peaked_tree);
  Instance greedy_tree = MakeInstance({2, 2}, 3, mode, 41);
  greedy_tree.target.one_hot = true;
  out.push_back(greedy_tree);
  return out;
}

double ExpectLossless(const Verifier& verifier, const std::vector<Instance>& instances, const std::string& label) {
  double worst = 0;
  for (const Instance& instance : instances) {
    auto comparison = enumeration::CheckExactly(verifier, instance);
    EXPECT_TRUE(comparison.ok()) << instance.Describe() << ": " << comparison.status();
    if (!comparison.ok()) continue;
    EXPECT_LT(comparison->max_abs_error, kLosslessTolerance) << instance.Describe();
    EXPECT_NEAR(comparison->total_probability, 1.0, kLosslessTolerance) << instance.Describe();
    worst = std::max(worst, comparison->max_abs_error);
  }
  std::printf("[ lossless ] %-34s max |error| %.3g over %zu instances\n", label.c_str(), worst, instances.size());
  return worst;
}

double MaxLawError(const Verifier& verifier, const std::vector<Instance>& instances) {
  double worst = 0;
  for (const Instance& instance : instances) {
    auto comparison = enumeration::CheckExactly(verifier, instance);
    EXPECT_TRUE(comparison.ok()) << instance.Describe() << ": " << comparison.status();
    if (comparison.ok()) worst = std::max(worst, comparison->max_abs_error);
  }
  return worst;
}

void ExpectDeviceRuleLawMatchesTarget(const std::string& rule, const std::vector<Instance>& instances,
                                      uint64_t rule_seed, uint64_t sample_seed, int samples) {
  for (const Instance& instance : instances) {
    auto adapter = enumeration::DeviceRuleAdapter::ForRule(rule, rule_seed);
    ASSERT_TRUE(adapter.ok()) << adapter.status();
    auto sampled = enumeration::SampleAgainstTarget(**adapter, instance, samples, sample_seed);
    ASSERT_TRUE(sampled.ok()) << sampled.status();
    EXPECT_LT(sampled->tv, sampled->bound) << rule << ": " << instance.Describe();
  }
}

void ExpectDeviceRuleCatchesMisdeclaredDrafts(const std::string& rule, DraftMode drawn, DraftSampling declared) {
  auto device = enumeration::DeviceRuleAdapter::ForRule(rule, 11);
  ASSERT_TRUE(device.ok()) << device.status();
  auto host = MakeVerifier(rule);
  ASSERT_NE(host, nullptr);
  Instance worst;
  double worst_error = 0;
  for (Instance instance : Catalogue(drawn, false)) {
    instance.declared_sampling = declared;
    if (const double error = MaxLawError(*host, {instance}); error > worst_error) {
      worst_error = error;
      worst = instance;
    }
  }
  ASSERT_GT(worst_error, kLossyThreshold) << rule << ": the host rule is not lossy on these drafts";
  auto sampled = enumeration::SampleAgainstTarget(**device, worst, 20000, 13);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  EXPECT_GT(sampled->tv, sampled->bound) << rule << ": " << worst.Describe();
}

int ExpectDeviceVerdictsEqualTheHostRules(const std::string& rule, const std::vector<DraftMode>& modes) {
  auto host = MakeVerifier(rule);
  if (host == nullptr) return 0;
  int compared = 0;
  for (bool flag_greedy : {true, false}) {
    auto device = enumeration::DeviceRuleAdapter::ForRule(rule, 1, flag_greedy);
    EXPECT_TRUE(device.ok()) << device.status();
    if (!device.ok()) return compared;
    for (DraftMode mode : modes) {
      for (const Instance& instance : Catalogue(mode, /*chains_only=*/false)) {
        InstanceModels models(instance);
        const absl::Status status = enumeration::ForEachDraft(
            instance, models, [&](const DraftedTree& drafted, double) -> absl::Status {
              const VerificationProblem problem = enumeration::MakeProblem(instance, models.target, drafted);
              SeededRandomSource unused(0);
              ASSIGN_OR_RETURN(Verdict expected, host->Verify(problem, unused));
              ASSIGN_OR_RETURN(Verdict got, (*device)->Verify(problem, unused));
              EXPECT_EQ(got.accepted, expected.accepted) << rule << ": " << instance.Describe();
              EXPECT_EQ(got.extra_token, expected.extra_token) << rule << ": " << instance.Describe();
              ++compared;
              return absl::OkStatus();
            });
        EXPECT_TRUE(status.ok()) << rule << ": " << status;
      }
    }
  }
  return compared;
}

void ExpectDeviceRuleGreedyAtTemperatureZero(const std::string& rule, const Instance& instance) {
  for (bool flag_greedy : {true, false}) {
    auto adapter = enumeration::DeviceRuleAdapter::ForRule(rule, /*seed=*/3, flag_greedy);
    ASSERT_TRUE(adapter.ok()) << adapter.status();
    EXPECT_GT(ExpectGreedyAtTemperatureZero(**adapter, instance), 0) << rule << " flag_greedy " << flag_greedy;
  }
}

int ExpectGreedyAtTemperatureZero(const Verifier& verifier, const Instance& instance) {
  EXPECT_TRUE(instance.target.one_hot) << "temperature-zero checks need one-hot target rows";
  auto greedy = MakeVerifier("greedy");
  if (greedy == nullptr) return 0;
  InstanceModels models(instance);
  int compared = 0;
  const absl::Status status =
      enumeration::ForEachDraft(instance, models, [&](const DraftedTree& drafted, double) -> absl::Status {
        if (!instance.draft.one_hot && HasDuplicateSiblings(drafted.tree)) return absl::OkStatus();
        const VerificationProblem problem = enumeration::MakeProblem(instance, models.target, drafted);
        SeededRandomSource unused(0);
        auto expected = greedy->Verify(problem, unused);
        auto law = enumeration::VerdictLaw(verifier, problem);
        if (!expected.ok()) return expected.status();
        if (!law.ok()) return law.status();
        double matching = 0;
        for (const auto& [verdict, probability] : *law)
          if (verdict.accepted == expected->accepted && verdict.extra_token == expected->extra_token)
            matching += probability;
        EXPECT_NEAR(matching, 1.0, kLosslessTolerance) << instance.Describe() << " " << DescribeTree(drafted.tree)
                                                       << ": greedy gives " << DescribeVerdict(*expected);
        ++compared;
        return absl::OkStatus();
      });
  EXPECT_TRUE(status.ok()) << instance.Describe() << ": " << status;
  return compared;
}

absl::Status VerifyOnceStatus(const Verifier& verifier, const Instance& instance) {
  InstanceModels models(instance);
  SeededRandomSource random(1);
  auto drafted = enumeration::DraftTree(instance, models.draft, random);
  if (!drafted.ok()) return drafted.status();
  const VerificationProblem problem = enumeration::MakeProblem(instance, models.target, *drafted);
  return verifier.Verify(problem, random).status();
}

double ExpectedAccepted(const Verifier& verifier, const Instance& instance) {
  auto comparison = enumeration::CheckExactly(verifier, instance);
  EXPECT_TRUE(comparison.ok()) << instance.Describe() << ": " << comparison.status();
  return comparison.ok() ? comparison->expected_accepted : 0.0;
}

Instance Figure2Instance(double q2) {
  Instance instance;
  instance.branching = {2};
  instance.mode = DraftMode::kIndependent;
  instance.target.constant_row = {1.0 / 3, 1.0 / 3, 1.0 / 3};
  instance.draft.constant_row = {1.0 / 3, q2, 2.0 / 3 - q2};
  return instance;
}

const std::vector<Figure2Row>& Figure2Table() {
  static const auto* table = new std::vector<Figure2Row>{{.05, .7642, .7421, .7308}, {.15, .9442, .8706, .8442},
                                                         {.25, 1.000, .9641, .9375}, {1.0 / 3, 1.000, 1.000, 1.000},
                                                         {.45, 1.000, .9375, .9086}, {.55, .8864, .8313, .8086},
                                                         {.65, .6997, .6926, .6886}};
  return *table;
}

}  // namespace enumeration_test
}  // namespace speclab
