#include "experiments/measure_acceptance.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/experiment_loading.h"
#include "framework/core/status_macros.h"
#include "framework/core/verifier_registry.h"
#include "framework/device_transfer.h"
#include "framework/speculative_decoder.h"

namespace speclab {
namespace {

using Clock = std::chrono::steady_clock;

struct MeasureSettings {
  int width = 8;
  double temperature = 1.0;
  std::vector<int> budgets = {1, 2, 4, 8, 16, 32, 64, 128};
  int repeats = 20;
};

absl::StatusOr<MeasureSettings> ReadSettings(Experiment& e) {
  MeasureSettings s;
  s.temperature = *std::max_element(e.temperatures.begin(), e.temperatures.end());
  if (!e.measure_acceptance) {
    if (s.temperature <= 0)
      return absl::InvalidArgumentError(
          "measure-acceptance samples at temperature > 0 (rrs_wor); set decoding.temperatures or "
          "measure_acceptance.temperature");
    return s;
  }
  Options& o = *e.measure_acceptance;
  ASSIGN_OR_RETURN(int64_t width, o.GetInt("width", s.width));
  if (width < 1 || width > 256) return o.Error("width", "expected a number of children in [1, 256]");
  s.width = static_cast<int>(width);
  ASSIGN_OR_RETURN(s.temperature, o.GetDouble("temperature", s.temperature));
  if (!(s.temperature > 0)) return o.Error("temperature", "expected a temperature > 0 (rrs_wor needs sampled drafts)");
  std::vector<int64_t> fallback(s.budgets.begin(), s.budgets.end());
  ASSIGN_OR_RETURN(std::vector<int64_t> budgets, o.GetIntList("budgets", fallback));
  s.budgets.clear();
  for (size_t i = 0; i < budgets.size(); ++i) {
    if (budgets[i] < 1 || (i > 0 && budgets[i] <= budgets[i - 1]))
      return o.Error("budgets", "expected increasing tree sizes >= 1");
    s.budgets.push_back(static_cast<int>(budgets[i]));
  }
  if (s.budgets.empty()) return o.Error("budgets", "expected at least one tree size");
  ASSIGN_OR_RETURN(int64_t repeats, o.GetIntIn("repeats", s.repeats, 1, 10000));
  s.repeats = static_cast<int>(repeats);
  RETURN_IF_ERROR(o.CheckAllUsed());
  return s;
}

// rrs_wor, recording which child of the root each step accepted. In the
// probe's depth-1 static tree node r + 1 is the rank-r draw (children are
// stored in draw order; draws past q's support are dropped from the end).
class RankRecorder final : public Verifier {
 public:
  RankRecorder(std::unique_ptr<Verifier> inner, int width) : inner_(std::move(inner)), accepted_(width, 0) {}

  VerifierTraits traits() const override { return inner_->traits(); }

  absl::StatusOr<Verdict> Verify(const VerificationProblem& problem, RandomSource& random) const override {
    ASSIGN_OR_RETURN(Verdict verdict, inner_->Verify(problem, random));
    ++steps_;
    if (!verdict.accepted.empty()) ++accepted_[verdict.accepted.front() - 1];
    return verdict;
  }

  int64_t steps() const { return steps_; }
  const std::vector<int64_t>& accepted() const { return accepted_; }

 private:
  std::unique_ptr<Verifier> inner_;
  // Verify() is const in the interface; the counts are the probe's output.
  mutable int64_t steps_ = 0;
  mutable std::vector<int64_t> accepted_;
};

absl::StatusOr<std::unique_ptr<TreeBuilder>> DepthOneTree(int width) {
  std::vector<std::string> paths;
  for (int r = 0; r < width; ++r) paths.push_back(absl::StrCat("[", r, "]"));
  ASSIGN_OR_RETURN(Options spec, Options::FromString(absl::StrCat("{type: static, sampling: true, choices: [",
                                                                  absl::StrJoin(paths, ", "), "]}"),
                                                     "measure-acceptance"));
  return TreeBuilderRegistry::Create(spec, "tree builder");
}

void Synchronize(c10::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Median milliseconds of one target forward over a star tree of n tokens
// (the root and n - 1 children) on top of `prompt`, for each n.
absl::StatusOr<std::vector<double>> TimeTarget(LlamaModel& target, const std::vector<int32_t>& prompt,
                                               const std::vector<int>& budgets, int repeats) {
  const c10::Device device = target.device();
  const int64_t context = static_cast<int64_t>(prompt.size()) - 1;
  if (context + budgets.back() > target.capacity())
    return absl::ResourceExhaustedError(absl::StrCat("timing a tree of ", budgets.back(), " tokens after a prompt of ",
                                                     prompt.size(), " needs more than models.kv_capacity = ",
                                                     target.capacity()));
  RETURN_IF_ERROR(target.Truncate(0));
  if (context > 0) {
    std::vector<int64_t> tokens(prompt.begin(), prompt.end() - 1), positions(context), slots(context);
    std::vector<uint8_t> mask(static_cast<size_t>(context) * context, 0);
    for (int64_t i = 0; i < context; ++i) {
      positions[i] = slots[i] = i;
      std::fill_n(&mask[static_cast<size_t>(i) * context], i + 1, 1);
    }
    RETURN_IF_ERROR(target.Forward(LongsToDevice(tokens, device), LongsToDevice(positions, device),
                                   MaskToDevice(mask, context, context, device))
                        .status());
    RETURN_IF_ERROR(target.Commit(slots));
  }
  std::vector<double> out;
  for (int n : budgets) {
    std::vector<int64_t> tokens(n, prompt.back()), positions(n, context + 1);
    positions[0] = context;
    std::vector<uint8_t> mask(static_cast<size_t>(n) * n, 0);
    for (int i = 0; i < n; ++i) mask[static_cast<size_t>(i) * n] = mask[static_cast<size_t>(i) * n + i] = 1;
    const at::Tensor t = LongsToDevice(tokens, device), p = LongsToDevice(positions, device);
    const at::Tensor m = MaskToDevice(mask, n, n, device);
    std::vector<double> ms;
    for (int r = -2; r < repeats; ++r) {  // two warm-up forwards
      Synchronize(device);
      const auto start = Clock::now();
      RETURN_IF_ERROR(target.Forward(t, p, m).status());
      Synchronize(device);
      if (r >= 0) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      RETURN_IF_ERROR(target.Truncate(context));
    }
    out.push_back(Median(ms));
  }
  return out;
}

// Median milliseconds of one drafter forward over a tree level of `width`
// nodes (the cost of one depth of drafting), after the prompt is cached.
absl::StatusOr<double> TimeDrafter(Drafter& drafter, const std::vector<int32_t>& prompt, int width, int repeats,
                                   c10::Device device) {
  RETURN_IF_ERROR(drafter.Reset(prompt, {}));
  RETURN_IF_ERROR(drafter.BeginStep(prompt));
  TokenTree first(prompt.back());
  RETURN_IF_ERROR(drafter.NextTokenLogits(first, {0}).status());
  RETURN_IF_ERROR(drafter.EndStep(first, {0}, {}));  // the prompt is now the drafter's cache
  std::vector<int32_t> context = prompt;
  context.push_back(prompt.back());
  TokenTree tree(context.back());
  std::vector<int> level;
  for (int i = 0; i < width; ++i) level.push_back(tree.AddNode(0, prompt[i % prompt.size()]));
  std::vector<double> ms;
  for (int r = -2; r < repeats; ++r) {
    RETURN_IF_ERROR(drafter.BeginStep(context));
    RETURN_IF_ERROR(drafter.NextTokenLogits(tree, {0}).status());
    Synchronize(device);
    const auto start = Clock::now();
    RETURN_IF_ERROR(drafter.NextTokenLogits(tree, level).status());
    Synchronize(device);
    if (r >= 0) ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  return Median(ms);
}

std::string List(const std::vector<double>& values) {
  std::vector<std::string> parts;
  for (double v : values) parts.push_back(absl::StrFormat("%.6g", v));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

absl::Status Measure(const std::string& experiment_config, const std::vector<std::string>& overrides,
                     const std::string& out_yaml) {
  c10::InferenceMode inference;
  ASSIGN_OR_RETURN(Options root, Options::FromFileWithOverrides(experiment_config, overrides));
  ASSIGN_OR_RETURN(Experiment e, LoadExperiment(root, /*first_methods=*/1));
  ASSIGN_OR_RETURN(MeasureSettings settings, ReadSettings(e));
  if (e.methods.empty()) return root.Error("methods", "measure-acceptance uses the first method's drafter; none given");
  Method& source = e.methods.front();
  if (source.drafter->kind() != DrafterKind::kDistributions)
    return root.Error("methods", absl::StrCat("the first method's drafter '", source.drafter_name,
                                              "' gives tokens only; acceptance by rank needs a distribution drafter"));
  ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> prompts, EncodePrompts(e));
  if (prompts.empty()) return root.Error("prompts", "no prompts");

  Method probe;
  probe.name = "measure-acceptance";
  probe.drafter_name = source.drafter_name;
  probe.drafter = std::move(source.drafter);
  probe.tree_builder_name = "static";
  ASSIGN_OR_RETURN(probe.tree_builder, DepthOneTree(settings.width));
  Options verifier_spec = *Options::FromString("{type: rrs_wor}", "measure-acceptance");
  ASSIGN_OR_RETURN(std::unique_ptr<Verifier> rrs_wor, VerifierRegistry::Create(verifier_spec, "verifier"));
  auto recorder = std::make_unique<RankRecorder>(std::move(rrs_wor), settings.width);
  const RankRecorder& counts = *recorder;
  probe.verifier = std::move(recorder);
  probe.verifier_name = "rrs_wor";
  Options policy_spec = *Options::FromString("{type: fixed, gamma: 1}", "measure-acceptance");
  ASSIGN_OR_RETURN(probe.policy, LengthPolicyRegistry::Create(policy_spec, "length policy"));
  probe.policy_name = "fixed";
  RETURN_IF_ERROR(probe.CheckCompatible());

  DecodeOptions options{.sampling = e.sampling, .max_new_tokens = e.max_new_tokens,
                        .eos_token = e.stop_at_eos ? e.tokenizer->eos_id() : -1, .seed = e.seed,
                        .time_phases = false};
  options.sampling.temperature = settings.temperature;
  for (size_t i = 0; i < prompts.size(); ++i) {
    options.seed = e.seed + i;
    auto generation = GenerateSpeculative(*e.target, probe, prompts[i], options);
    if (!generation.ok())
      return absl::Status(generation.status().code(),
                          absl::StrCat("prompt ", e.prompts[i].id, ": ", generation.status().message()));
    std::cerr << absl::StrFormat("\r  measure-acceptance: %d/%d prompts", i + 1, prompts.size());
  }
  std::cerr << "\n";
  if (counts.steps() == 0) return absl::FailedPreconditionError("no speculative step ran");
  std::vector<double> acceptance;
  for (int64_t c : counts.accepted()) acceptance.push_back(static_cast<double>(c) / counts.steps());

  const c10::Device device = e.target->device();
  ASSIGN_OR_RETURN(std::vector<double> target_ms, TimeTarget(*e.target, prompts.front(), settings.budgets, settings.repeats));
  ASSIGN_OR_RETURN(double draft_ms, TimeDrafter(*probe.drafter, prompts.front(), settings.width, settings.repeats, device));

  std::ofstream out(out_yaml);
  if (!out) return absl::InternalError(absl::StrCat(out_yaml, ": cannot write"));
  std::vector<double> accepted(counts.accepted().begin(), counts.accepted().end());
  std::vector<double> budgets(settings.budgets.begin(), settings.budgets.end());
  out << "# speclab measure-acceptance: positional acceptance of a depth-1 tree of `width`\n"
      << "# children drawn without replacement and verified with rrs_wor, and the\n"
      << "# target's and drafter's forward times (docs/algorithms.md §2.5). Usable as a sequoia\n"
      << "# tree builder's acceptance_file and latency_profile_file.\n"
      << "experiment: \"" << e.name << "\"\n"
      << "drafter_of_method: \"" << source.name << "\"\n"
      << "device: \"" << device.str() << "\"\n"
      << "temperature: " << absl::StrFormat("%g", settings.temperature) << "\n"
      << "width: " << settings.width << "\n"
      << "steps: " << counts.steps() << "\n"
      << "accepted_by_rank: " << List(accepted) << "\n"
      << "acceptance: " << List(acceptance) << "\n"
      << "latency_profile:\n"
      << "  budgets: " << List(budgets) << "\n"
      << "  target_ms: " << List(target_ms) << "\n"
      << "  draft_ms: " << absl::StrFormat("%.6g", draft_ms) << "\n";
  if (!out.good()) return absl::InternalError(absl::StrCat(out_yaml, ": write failed"));
  std::cerr << absl::StrFormat("speclab: %d steps; acceptance %s; wrote %s\n", counts.steps(), List(acceptance),
                               out_yaml);
  return absl::OkStatus();
}

}  // namespace

// LibTorch reports errors by throwing c10::Error; none may leave the command.
absl::Status RunMeasureAcceptance(const std::string& experiment_config, const std::vector<std::string>& overrides,
                                  const std::string& out_yaml) {
  try {
    return Measure(experiment_config, overrides, out_yaml);
  } catch (const std::exception& error) {
    return absl::InternalError(absl::StrCat("measure-acceptance failed: ", error.what()));
  }
}

}  // namespace speclab
