#include "framework/method.h"

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"
#include "framework/model/language_model.h"

namespace speclab {

absl::Status Method::CheckCompatible() const {
  const VerifierTraits verifier_traits = verifier->traits();
  const TreeBuilderTraits builder_traits = tree_builder->traits();
  const bool token_only = drafter->kind() == DrafterKind::kTokensOnly;
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("method '", name, "': ", why));
  };
  if (builder_traits.needs_continuations && !token_only)
    return refuse(absl::StrCat("tree builder '", tree_builder_name, "' merges the token continuations of a token-only "
                               "drafter, but drafter '", drafter_name, "' gives next-token logits (use a builder that "
                               "reads them, e.g. chain, dynamic_topk or opt_tree)"));
  if (builder_traits.needs_distributions && token_only)
    return refuse(absl::StrCat("tree builder '", tree_builder_name, "' needs next-token distributions but drafter '",
                               drafter_name, "' gives tokens only"));
  if (verifier_traits.needs_draft_distributions && (token_only || !builder_traits.samples_tokens))
    return refuse(absl::StrCat("verifier '", verifier_name, "' needs the distributions q the drafts were sampled from, "
                               "but ", token_only ? absl::StrCat("drafter '", drafter_name, "' gives tokens only")
                                                  : absl::StrCat("tree builder '", tree_builder_name,
                                                                 "' does not sample its tokens"),
                               " (use a verifier that takes token-only drafts, e.g. greedy or point_mass)"));
  if (length_policy_configured && builder_traits.length_control == LengthControl::kNone)
    return refuse(absl::StrCat("tree builder '", tree_builder_name, "' shapes its trees from its own options, so the "
                               "length policy '", policy_name, "' would be ignored: remove length_policy, or use a "
                               "builder that follows one (chain, multi_sample, dynamic_topk without depth, best_first without "
                               "max_beam_len, opt_tree or trie without max_depth)"));
  const DraftRow row = policy->draft_row();
  if (row != DraftRow::kNone && token_only)
    return refuse(absl::StrCat("length policy '", policy_name, "' reads the drafter's ",
                               row == DraftRow::kHidden ? "hidden states" : "log-probabilities", ", but drafter '",
                               drafter_name, "' gives tokens only"));
  if (row == DraftRow::kLogProbs) {
    for (LanguageModel* model : drafter->models()) {
      if (model->config().vocab_size != policy->draft_row_width())
        return refuse(absl::StrCat("length policy '", policy_name, "' reads log-probability rows of ",
                                   policy->draft_row_width(), " tokens (its head's input), but drafter '",
                                   drafter_name, "' has a vocabulary of ", model->config().vocab_size));
    }
  }
  if (row == DraftRow::kHidden && drafter->hidden_size() != policy->draft_row_width())
    return refuse(absl::StrCat("length policy '", policy_name, "' reads hidden states of width ",
                               policy->draft_row_width(), " (its head's input), but drafter '", drafter_name, "' ",
                               drafter->hidden_size() == 0
                                   ? std::string("gives none (drafters of one model do, e.g. 'model')")
                                   : absl::StrCat("has hidden states of width ", drafter->hidden_size())));
  if ((policy->wants_progress() || row != DraftRow::kNone) &&
      builder_traits.length_control != LengthControl::kPerToken)
    return refuse(absl::StrCat("length policy '", policy_name, "' stops drafting token by token, which tree builder '",
                               tree_builder_name, "' never asks it (only chain does)"));
  if (drafter->part_count() > 1 && !builder_traits.drafts_per_part)
    return refuse(absl::StrCat("drafter '", drafter_name, "' holds ", drafter->part_count(),
                               " drafters of logits, each with its own q, which tree builder '", tree_builder_name,
                               "' would not tell apart: draft a branch per drafter with the tree builder 'part_chains'"));
  if (builder_traits.drafts_per_part && verifier_traits.needs_shared_sibling_rows)
    return refuse(absl::StrCat("verifier '", verifier_name, "' tries siblings against one q row they share, but tree "
                               "builder '", tree_builder_name, "' draws each branch from its own drafter's q (use "
                               "specinfer, which tries each child against its own row, or point_mass)"));
  if (verifier_traits.chain_only && builder_traits.may_branch)
    return refuse(absl::StrCat("verifier '", verifier_name, "' verifies chains only, but tree builder '",
                               tree_builder_name, "' builds trees"));
  return absl::OkStatus();
}

namespace {

// Reads `key` as a plugin spec; a missing key means {type: fallback}.
absl::StatusOr<Options> PluginSpec(Options& spec, const std::string& key, const std::string& fallback) {
  if (!spec.Has(key) && !fallback.empty()) {
    YAML::Node node(YAML::NodeType::Map);
    node["type"] = fallback;
    return Options(node, spec.file(), absl::StrCat(spec.path(), ".", key));
  }
  if (!spec.Has(key)) return spec.Error(key, "missing required key");
  return spec.GetMap(key);
}

// `draft_sampling:`, each key optional; values checked as the experiment's are.
absl::StatusOr<DrafterSampling> ReadDrafterSampling(Options& spec) {
  DrafterSampling out;
  if (!spec.Has("draft_sampling")) return out;
  ASSIGN_OR_RETURN(Options sampling, spec.GetMap("draft_sampling"));
  SamplingParams check;
  if (sampling.Has("temperature")) {
    ASSIGN_OR_RETURN(check.temperature, sampling.GetDouble("temperature"));
    // Greedy drafts keep no q rows on the device path (q is their one-hot):
    // drafting at temperature 0 is the experiment's own temperature 0.
    if (!(check.temperature > 0))
      return sampling.Error("temperature", "expected a temperature > 0 (greedy drafting is decoding.temperatures: [0])");
    out.temperature = check.temperature;
  }
  if (sampling.Has("top_k")) {
    ASSIGN_OR_RETURN(check.top_k, sampling.GetInt("top_k"));
    out.top_k = check.top_k;
  }
  if (sampling.Has("top_p")) {
    ASSIGN_OR_RETURN(check.top_p, sampling.GetDouble("top_p"));
    out.top_p = check.top_p;
  }
  RETURN_IF_ERROR(sampling.CheckAllUsed());
  if (absl::Status valid = check.Validate(); !valid.ok()) return spec.Error("draft_sampling", std::string(valid.message()));
  return out;
}

}  // namespace

absl::StatusOr<Method> CreateMethod(Options& spec, const DrafterEnvironment& environment) {
  Method method;
  ASSIGN_OR_RETURN(method.name, spec.GetString("name"));
  ASSIGN_OR_RETURN(Options drafter, PluginSpec(spec, "drafter", ""));
  ASSIGN_OR_RETURN(Options builder, PluginSpec(spec, "tree_builder", "chain"));
  ASSIGN_OR_RETURN(Options verifier, PluginSpec(spec, "verifier", ""));
  ASSIGN_OR_RETURN(Options policy, PluginSpec(spec, "length_policy", "fixed"));
  ASSIGN_OR_RETURN(method.drafter_sampling, ReadDrafterSampling(spec));
  RETURN_IF_ERROR(spec.CheckAllUsed());
  const Options device_verifier_spec = verifier;  // before the host rule reads (and marks) its keys
  const Options device_stop_spec = policy;
  ASSIGN_OR_RETURN(method.drafter, DrafterRegistry::Create(drafter, "drafter", environment));
  ASSIGN_OR_RETURN(method.tree_builder, TreeBuilderRegistry::Create(builder, "tree builder"));
  ASSIGN_OR_RETURN(method.verifier, VerifierRegistry::Create(verifier, "verifier"));
  ASSIGN_OR_RETURN(method.policy, LengthPolicyRegistry::Create(policy, "length policy"));
  method.drafter_name = *drafter.GetString("type");
  method.tree_builder_name = *builder.GetString("type");
  method.verifier_name = *verifier.GetString("type");
  method.policy_name = *policy.GetString("type");
  method.length_policy_configured = spec.Has("length_policy");
  if (auto status = method.CheckCompatible(); !status.ok())
    return absl::InvalidArgumentError(absl::StrCat(spec.file(), ":", spec.node().Mark().line + 1, ": ", status.message()));
  RETURN_IF_ERROR(AttachDeviceVerifier(method, device_verifier_spec));
  RETURN_IF_ERROR(AttachDeviceStop(method, device_stop_spec));
  return method;
}

std::string WhyNoDeviceVerifier(const Method& method) {
  if (DeviceVerifierRegistry::Find(method.verifier_name) == nullptr)
    return absl::StrCat("the verifier '", method.verifier_name,
                        "' has no device form: each step brings every node's probability rows to the host");
  if (!method.device_verifier_declined.empty())
    return absl::StrCat("the verifier '", method.verifier_name, "' has no device form with these options: ",
                        method.device_verifier_declined);
  return absl::StrCat("the verifier '", method.verifier_name, "' has a device form for chains only, and the tree builder '",
                      method.tree_builder_name, "' branches");
}

absl::Status AttachDeviceVerifier(Method& method, Options verifier_spec) {
  method.device_verifier.reset();
  method.device_verifier_declined.clear();
  const auto* entry = DeviceVerifierRegistry::Find(method.verifier_name);
  if (entry == nullptr) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<DeviceVerifier>> created = entry->create(verifier_spec);
  if (created.status().code() == absl::StatusCode::kUnimplemented) {
    method.device_verifier_declined = std::string(created.status().message());
    return absl::OkStatus();
  }
  if (!created.ok()) return created.status();
  std::unique_ptr<DeviceVerifier> device = *std::move(created);
  if (!method.tree_builder->traits().may_branch || device->verifies_trees()) method.device_verifier = std::move(device);
  return absl::OkStatus();
}

absl::Status AttachDeviceStop(Method& method, Options policy_spec) {
  method.device_stop.reset();
  const auto* entry = DeviceLengthStopRegistry::Find(method.policy_name);
  if (entry == nullptr || !method.policy->wants_progress()) return absl::OkStatus();
  ASSIGN_OR_RETURN(method.device_stop, entry->create(policy_spec));
  return absl::OkStatus();
}

}  // namespace speclab
