#include "algorithms/verifiers/testing/device_rule_adapter.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "absl/strings/str_cat.h"
#include "framework/core/options.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"

namespace speclab::enumeration {
namespace {

at::Tensor RowsToTensor(const ProbabilityRows& rows) {
  at::Tensor out = at::empty({rows.rows(), rows.vocab()}, at::kDouble);
  std::copy(rows.row(0).data(), rows.row(0).data() + static_cast<size_t>(rows.rows()) * rows.vocab(),
            out.data_ptr<double>());
  return out.to(at::kFloat);  // the engine's rows are float32
}

}  // namespace

DeviceRuleAdapter::DeviceRuleAdapter(std::unique_ptr<DeviceVerifier> rule, VerifierTraits traits, uint64_t seed,
                                       bool flag_greedy, bool shift_draft_rows)
    : rule_(std::move(rule)),
      traits_(traits),
      generator_(at::detail::createCPUGenerator(seed)),
      flag_greedy_(flag_greedy),
      shift_draft_rows_(shift_draft_rows) {}

absl::StatusOr<std::unique_ptr<DeviceRuleAdapter>> DeviceRuleAdapter::Create(const std::string& name,
                                                                               VerifierTraits traits, uint64_t seed,
                                                                               bool flag_greedy,
                                                                               bool shift_draft_rows) {
  const auto* entry = DeviceVerifierRegistry::Find(name);
  if (entry == nullptr) return absl::NotFoundError(absl::StrCat("no device rule named '", name, "'"));
  ASSIGN_OR_RETURN(Options options, Options::FromString("{}", "device_rule_adapter"));
  ASSIGN_OR_RETURN(auto rule, entry->create(options));
  return std::unique_ptr<DeviceRuleAdapter>(
      new DeviceRuleAdapter(std::move(rule), traits, seed, flag_greedy, shift_draft_rows));
}

absl::StatusOr<std::unique_ptr<DeviceRuleAdapter>> DeviceRuleAdapter::ForRule(const std::string& name,
                                                                                uint64_t seed, bool flag_greedy,
                                                                                bool shift_draft_rows) {
  ASSIGN_OR_RETURN(Options spec, Options::FromString(absl::StrCat("{type: ", name, "}"), "device_rule_adapter"));
  ASSIGN_OR_RETURN(std::unique_ptr<Verifier> host, VerifierRegistry::Create(spec, "verifier"));
  return Create(name, host->traits(), seed, flag_greedy, shift_draft_rows);
}

absl::StatusOr<Verdict> DeviceRuleAdapter::Verify(const VerificationProblem& problem, RandomSource&) const {
  const TokenTree& tree = *problem.tree;
  std::vector<int64_t> tokens(tree.size());
  for (int i = 0; i < tree.size(); ++i) tokens[i] = tree.token(i);
  if (tree.max_depth() != tree.size() - 1) return VerifyTree(problem, tokens);
  DeviceChainProblem device{.tokens = at::tensor(tokens, at::kLong), .target_probs = RowsToTensor(problem.target)};
  // Probability rows whose maximum is 1 are one-hot.
  device.greedy = flag_greedy_ && device.target_probs.amax(1).eq(1).all().item<bool>();
  if (!problem.draft.empty()) {
    device.draft_probs = RowsToTensor(problem.draft);
    if (shift_draft_rows_ && tree.size() > 2) device.draft_probs = device.draft_probs.roll(1, 0);
  }
  ASSIGN_OR_RETURN(at::Tensor answer, rule_->Verify(device, generator_));
  const int64_t accepted = answer[0].item<int64_t>();
  Verdict verdict;
  for (int i = 1; i <= accepted; ++i) verdict.accepted.push_back(i);
  verdict.extra_token = static_cast<int32_t>(answer[1].item<int64_t>());
  return verdict;
}

absl::StatusOr<Verdict> DeviceRuleAdapter::VerifyTree(const VerificationProblem& problem,
                                                      const std::vector<int64_t>& tokens) const {
  if (!rule_->verifies_trees()) return absl::InvalidArgumentError("this device rule verifies chains only");
  const TokenTree& tree = *problem.tree;
  std::vector<int64_t> parents(tree.size());
  for (int i = 0; i < tree.size(); ++i) parents[i] = tree.parent(i);
  DeviceTreeProblem device{.tokens = at::tensor(tokens, at::kLong), .parents = at::tensor(parents, at::kLong),
                           .target_probs = RowsToTensor(problem.target)};
  device.greedy = flag_greedy_ && device.target_probs.amax(1).eq(1).all().item<bool>();
  if (!problem.draft.empty()) {
    device.draft_probs = RowsToTensor(problem.draft);
    if (shift_draft_rows_) device.draft_probs = device.draft_probs.roll(1, 0);
  }
  device.sampling = problem.sampling;
  ASSIGN_OR_RETURN(at::Tensor answer, rule_->VerifyTree(device, generator_));
  const int64_t n = tree.size(), accepted = answer[0].item<int64_t>();
  Verdict verdict;
  for (int64_t i = 1; i <= accepted; ++i) verdict.accepted.push_back(static_cast<int>(answer[i].item<int64_t>()));
  verdict.extra_token = static_cast<int32_t>(answer[n].item<int64_t>());
  return verdict;
}

}  // namespace speclab::enumeration
