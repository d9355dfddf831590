#include "tests/support/length_policy_checks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/core/length_policy.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_length_stop.h"
#include "framework/method.h"
#include "framework/speculative_decoder.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab::testing {

absl::StatusOr<std::unique_ptr<DraftLengthPolicy>> MakeLengthPolicy(const std::string& yaml) {
  ASSIGN_OR_RETURN(Options options, Options::FromString(yaml, "policy.yaml"));
  return LengthPolicyRegistry::Create(options, "length policy");
}

absl::StatusOr<std::unique_ptr<DeviceLengthStop>> MakeDeviceStop(const std::string& yaml) {
  ASSIGN_OR_RETURN(Options options, Options::FromString(yaml, "policy.yaml"));
  ASSIGN_OR_RETURN(std::string type, options.GetString("type"));
  const auto* entry = DeviceLengthStopRegistry::Find(type);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat(type, " has no device form"));
  return entry->create(options);
}

std::string LengthPolicyError(const std::string& yaml) {
  return std::string(MakeLengthPolicy(yaml).status().message());
}

namespace {

// The policy of `policy_yaml` in `method`, with its device form for kDevice.
void Install(Method& method, const std::string& policy_yaml, const std::string& policy_name, PolicyForm form) {
  auto policy = MakeLengthPolicy(policy_yaml);
  ASSERT_TRUE(policy.ok()) << policy.status();
  method.policy = *std::move(policy);
  method.policy_name = policy_name;
  method.device_stop.reset();
  if (form == PolicyForm::kHost) return;
  auto options = Options::FromString(policy_yaml, "policy.yaml");
  ASSERT_TRUE(options.ok()) << options.status();
  ASSERT_TRUE(AttachDeviceStop(method, *options).ok());
  ASSERT_NE(method.device_stop, nullptr) << policy_name << " has no device form";
}

// The engine form a pipelined run of `form` reports: chains cut on the
// device, or (kHost) the policy named, either as why the steps ran on the
// host or as observing each step one step late (DraftLengthPolicy::
// may_observe_late).
void ExpectForm(const std::string& engine_form, const std::string& policy_name, PolicyForm form) {
  if (form == PolicyForm::kDevice) {
    EXPECT_EQ(engine_form, "pipelined chain") << policy_name;
  } else {
    EXPECT_THAT(engine_form, ::testing::HasSubstr("the length policy '" + policy_name + "'"));
  }
}

}  // namespace

void ExpectGreedyWithAMovingLength(const std::string& policy_yaml, const std::string& policy_name,
                                   uint64_t drafter_seed, double drafter_logit_scale, PolicyForm form) {
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2, 5, 3};
  auto target = TinyModel(1);
  const DecodeOptions options{.sampling = {.temperature = 0}, .max_new_tokens = 40};
  auto greedy = GenerateAutoregressive(*target, prompt, options);
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  Method method =
      ModelDrafterMethod(TinyModel(drafter_seed, 16, 2, drafter_logit_scale), "{type: chain}", "{type: greedy}", 1);
  // Pipelined where the engine can (a moving length observed one step late,
  // or a device stop), and step by step; a fresh policy each time.
  std::vector<int> lengths_by_form[2];
  for (bool pipeline : {true, false}) {
    Install(method, policy_yaml, policy_name, form);
    DecodeOptions run = options;
    run.pipeline = pipeline;
    auto out = GenerateSpeculative(*target, method, prompt, run);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->tokens, greedy->tokens) << policy_yaml << (pipeline ? ", pipelined" : ", step by step");
    std::set<int> lengths;
    for (const StepStats& s : out->steps) {
      lengths.insert(s.longest_path);
      lengths_by_form[pipeline].push_back(s.longest_path);
    }
    EXPECT_GT(lengths.size(), 1u) << policy_yaml << ": the draft length never moved";
    if (pipeline) {
      ExpectForm(out->engine_form, policy_name, form);
    } else {
      EXPECT_EQ(out->engine_form, "step by step: decoding.pipeline is off (its default off CUDA)");
    }
  }
  // A device stop decides as the host rule does, on the same drafts and the
  // same rows of them: step for step the same lengths.
  if (form == PolicyForm::kDevice)
    EXPECT_EQ(lengths_by_form[true], lengths_by_form[false]) << policy_yaml << ": the forms chose other lengths";
}

void ExpectChainLawWithPolicy(const std::string& policy_yaml, const std::string& policy_name, PolicyForm form) {
  const std::vector<int32_t> prompt = {1, 5, 3, 7, 2, 5, 3};
  auto target = TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const TwoTokenLaw law = ExactTwoTokenLaw(*target, prompt, 1.0);
  // The target's network at a lower logit scale drafts: close enough to accept often.
  Method method = ModelDrafterMethod(TinyModel(7, 8, 1, 15), "{type: chain}", "{type: rejection}", 1);
  Install(method, policy_yaml, policy_name, form);
  constexpr int kRuns = 2000;
  TwoTokenCounts counts;
  std::set<int> lengths;
  for (int i = 0; i < kRuns; ++i) {
    const DecodeOptions options{
        .sampling = {.temperature = 1}, .max_new_tokens = 2, .seed = 1000 + static_cast<uint64_t>(i)};
    auto out = GenerateSpeculative(*target, method, prompt, options);
    ASSERT_TRUE(out.ok()) << out.status();
    ++counts[{out->tokens[0], out->tokens[1]}];
    for (const StepStats& s : out->steps) lengths.insert(s.longest_path);
    if (i == 0) ExpectForm(out->engine_form, policy_name, form);
  }
  const ChiSquareResult result = ChiSquareTest(counts, law, kRuns);
  EXPECT_LT(result.statistic, result.critical) << policy_yaml;
  if (form == PolicyForm::kDevice) {  // what matters there: chains cut short of the maximum
    EXPECT_LT(*lengths.begin(), method.policy->MaxDraftLength()) << policy_yaml << ": no chain was cut";
  } else {
    EXPECT_GT(lengths.size(), 1u) << policy_yaml << ": the policy never changed its length";
  }
}

void ExpectDeviceStopKeepsTheHostRulesDrafts(const std::string& policy_yaml) {
  auto host = MakeLengthPolicy(policy_yaml);
  ASSERT_TRUE(host.ok()) << host.status();
  auto device = MakeDeviceStop(policy_yaml);
  ASSERT_TRUE(device.ok()) << device.status();
  const int gamma = (*host)->MaxDraftLength();
  at::Generator generator = at::detail::createCPUGenerator(7);
  std::set<int64_t> kept_lengths;
  for (int chain = 0; chain < 200; ++chain) {
    at::Tensor facts = at::rand({gamma, 3}, generator, at::kFloat) * at::tensor({1.0f, 5.0f, 1.0f});
    const DraftRow row = (*host)->draft_row();
    const int64_t width = (*host)->draft_row_width();
    if (row == DraftRow::kLogProbs) {
      // Rows from peaked to flat, as drafters give them.
      const at::Tensor scale = at::rand({gamma, 1}, generator, at::kFloat) * 6;
      facts = at::cat({facts, (at::randn({gamma, width}, generator, at::kFloat) * scale).log_softmax(1)}, 1);
    } else if (row == DraftRow::kHidden) {
      facts = at::cat({facts, at::randn({gamma, width}, generator, at::kFloat)}, 1);
    }
    const at::Tensor host_facts = facts.to(at::kDouble);
    int expected = gamma;
    for (int d = 1; d <= gamma; ++d) {
      const absl::Span<const float> rest = absl::MakeConstSpan(facts[d - 1].data_ptr<float>() + 3, facts.size(1) - 3);
      const DraftProgress progress{.depth = d,
                                   .draft_probability = host_facts[d - 1][0].item<double>(),
                                   .draft_entropy = host_facts[d - 1][1].item<double>(),
                                   .top_probability = host_facts[d - 1][2].item<double>(),
                                   .log_probs = row == DraftRow::kLogProbs ? rest : absl::Span<const float>(),
                                   .hidden = row == DraftRow::kHidden ? rest : absl::Span<const float>()};
      if (!(*host)->ContinueDrafting(progress)) {
        expected = d;
        break;
      }
    }
    const int64_t kept = (*device)->KeptLength(FactsOfColumns(facts, row)).item<int64_t>();
    EXPECT_EQ(kept, expected) << policy_yaml << ", chain " << chain << ":\n" << facts;
    // Each stop reads the drafts up to its own only: the engine asks after
    // each draft with the facts so far.
    const at::Tensor stops = (*device)->Stops(FactsOfColumns(facts, row));
    for (int64_t n = 1; n < gamma; ++n)
      EXPECT_TRUE(at::equal((*device)->Stops(FactsOfColumns(facts.narrow(0, 0, n), row)), stops.narrow(0, 0, n)))
          << policy_yaml << ", chain " << chain << ": the stops of the first " << n << " drafts moved with later ones";
    kept_lengths.insert(kept);
  }
  EXPECT_GT(kept_lengths.size(), 1u) << policy_yaml << ": the random facts never moved the length";
}

void ExpectDeviceStopDecidesAsTheHostRuleOnFact(const std::string& policy_yaml, DraftFact fact) {
  auto host = MakeLengthPolicy(policy_yaml);
  ASSERT_TRUE(host.ok()) << host.status();
  auto device = MakeDeviceStop(policy_yaml);
  ASSERT_TRUE(device.ok()) << device.status();
  const bool entropy = fact == DraftFact::kEntropy;
  const auto host_stops = [&](double value) {
    DraftProgress progress{.depth = 1};
    (entropy ? progress.draft_entropy : progress.top_probability) = value;
    return !(*host)->ContinueDrafting(progress);
  };
  const bool at_zero = host_stops(0);
  const float bound = static_cast<float>(FirstFloatWhere([&](double value) { return host_stops(value) != at_zero; }));
  ASSERT_TRUE(std::isfinite(bound)) << policy_yaml << ": the rule should change its answer at some value";
  std::vector<float> values = {0.0f, -0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  float below = bound, above = bound;
  for (int i = 0; i < 8; ++i) {
    values.push_back(below);
    values.push_back(above);
    below = std::nextafter(below, 0.0f);
    above = std::nextafter(above, std::numeric_limits<float>::infinity());
  }
  at::Generator generator = at::detail::createCPUGenerator(11);
  const at::Tensor random = at::rand({2000}, generator, at::kFloat) * (entropy ? 30 : 1);
  for (int64_t i = 0; i < random.size(0); ++i) values.push_back(random[i].item<float>());
  at::Tensor facts = at::zeros({static_cast<int64_t>(values.size()), 3});
  facts.select(1, entropy ? 1 : 2).copy_(at::tensor(values));
  const at::Tensor stops = (*device)->Stops(FactsOfColumns(facts, DraftRow::kNone));
  int disagreements = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    const bool want = host_stops(values[i]);
    if (stops[static_cast<int64_t>(i)].item<bool>() != want && ++disagreements <= 5)
      ADD_FAILURE() << policy_yaml << ": at " << (entropy ? "entropy " : "top probability ") << values[i]
                    << " the host rule " << (want ? "stops" : "goes on") << ", the device form does not";
  }
  EXPECT_EQ(disagreements, 0) << policy_yaml << " (the first value where the rule changes: " << bound << ")";
  EXPECT_EQ(host_stops(std::nextafter(bound, 0.0f)), at_zero);
  EXPECT_NE(host_stops(bound), at_zero);
}

}  // namespace speclab::testing
