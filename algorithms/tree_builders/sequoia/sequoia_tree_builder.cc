// `sequoia`: the DP-optimal static tree for a measured positional acceptance
// vector (docs/algorithms.md §2.5), drafted like `static`: siblings drawn
// without replacement at temperature > 0 (verify with rrs_wor, as Sequoia
// does), top-k at temperature 0 (greedy, point_mass).
//
//   tree_builder: {type: sequoia, acceptance: [0.65, 0.1, 0.05], budget: 16, max_depth: 8}
//   tree_builder: {type: sequoia, acceptance_file: results/acceptance.yaml,
//                  latency_profile_file: results/acceptance.yaml, max_depth: 10}
//
// Options:
//   acceptance | acceptance_file   p_1..p_W, or a YAML file whose `acceptance`
//                                  key holds them (`speclab measure-acceptance`)
//   budget                         tree size n, root included (>= 2)
//   latency_profile | latency_profile_file
//                                  {budgets: [...], target_ms: [...], draft_ms: x}
//                                  (inline, or the `latency_profile` key of a
//                                  file): instead of `budget`, pick the n and
//                                  depth minimising (d·t_draft + t_target(n)) / F
//   max_depth                      drafted tokens on the longest path (default 10)
//   sampling                       draw siblings without replacement at T > 0 (default true)
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/shape_tree_builder.h"
#include "algorithms/tree_builders/common/tree_shape.h"
#include "algorithms/tree_builders/sequoia/sequoia_dp.h"
#include "framework/core/latency_profile.h"
#include "framework/core/status_macros.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

using tree_builders::SequoiaTable;
using tree_builders::TreeShape;

constexpr char kName[] = "sequoia";
constexpr int64_t kDefaultMaxDepth = 10;
constexpr int64_t kMaxBudget = 4096;

absl::StatusOr<std::vector<double>> ReadAcceptance(Options& options) {
  ASSIGN_OR_RETURN(Options source, InlineOrFile(options, "acceptance", "acceptance_file", /*required=*/true));
  ASSIGN_OR_RETURN(std::vector<double> p, source.GetDoubleList("acceptance"));
  if (p.empty()) return source.Error("acceptance", "expected at least one value");
  double sum = 0;
  for (double v : p) {
    if (!(v >= 0 && v <= 1)) return source.Error("acceptance", absl::StrCat("value ", v, " is not a probability"));
    sum += v;
  }
  // p_k are probabilities of disjoint events (which rank was accepted).
  if (sum > 1 + 1e-6) return source.Error("acceptance", absl::StrCat("values sum to ", sum, " > 1"));
  return p;
}

absl::StatusOr<std::unique_ptr<TreeBuilder>> Create(Options& options) {
  ASSIGN_OR_RETURN(bool sampling, options.GetBool("sampling", true));
  ASSIGN_OR_RETURN(int64_t max_depth, options.GetIntIn("max_depth", kDefaultMaxDepth, 1, 64));
  ASSIGN_OR_RETURN(std::vector<double> acceptance, ReadAcceptance(options));
  const int levels = static_cast<int>(max_depth) + 1;

  const bool has_profile = options.Has("latency_profile") || options.Has("latency_profile_file");
  if (has_profile == options.Has("budget"))
    return options.Error("budget", "give exactly one of 'budget' and a latency profile "
                                   "('latency_profile' or 'latency_profile_file')");
  std::vector<std::vector<int64_t>> choices;
  if (has_profile) {
    ASSIGN_OR_RETURN(LatencyProfile profile, ReadLatencyProfile(options));
    if (profile.budgets.back() < 2)
      return options.Error("latency_profile", "expected a budget >= 2 (the root plus one draft)");
    ASSIGN_OR_RETURN(SequoiaTable table, SequoiaTable::Compute(acceptance, profile.budgets.back(), levels));
    auto choice = tree_builders::ChooseHardwareAware(table, profile);
    if (!choice.ok()) return options.Error("latency_profile", std::string(choice.status().message()));
    choices = choice->choices;
  } else {
    ASSIGN_OR_RETURN(int64_t budget, options.GetInt("budget"));
    if (budget < 2 || budget > kMaxBudget)
      return options.Error("budget", absl::StrCat("expected a tree size in [2, ", kMaxBudget, "] (root included)"));
    ASSIGN_OR_RETURN(SequoiaTable table, SequoiaTable::Compute(acceptance, static_cast<int>(budget), levels));
    choices = table.TreeAtMost(static_cast<int>(budget), levels);
  }
  if (choices.empty()) return options.Error("acceptance", "the optimal tree drafts nothing (all p_k are 0?)");
  auto shape = tree_builders::ShapeFromChoices(choices);
  if (!shape.ok()) return absl::InternalError(absl::StrCat("sequoia DP built an invalid tree: ", shape.status().message()));
  return std::unique_ptr<TreeBuilder>(std::make_unique<tree_builders::ShapeTreeBuilder>(kName, *std::move(shape),
                                                                                        sampling));
}

const bool kRegistered = TreeBuilderRegistry::Add({
    .name = kName,
    .description = "Sequoia DP-optimal tree for a positional acceptance vector, optionally hardware-aware; "
                   "siblings without replacement at T>0 (§2.5)",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab
