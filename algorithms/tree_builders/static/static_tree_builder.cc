// `static`: a fixed tree in Medusa-choices format (docs/algorithms.md §2.3),
// drafted with EAGLE-1 semantics (common/shape_drafting.h).
//
//   tree_builder: {type: static, choices: [[0], [1], [0, 0]]}
//   tree_builder: {type: static, choices_file: configs/trees/eagle_mc_sim_7b_63.yaml, sampling: true}
//
// Rank r at a node is the r-th most likely token of the drafter's q at that
// node's own path (deterministic; verify with greedy or point_mass), or with
// `sampling: true` the r-th draw without replacement from q (rrs_wor,
// traversal); at temperature 0 both draft top-k. A choices file is a YAML
// mapping with one key, `choices`.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "algorithms/tree_builders/common/shape_tree_builder.h"
#include "algorithms/tree_builders/common/tree_shape.h"
#include "framework/core/status_macros.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

using tree_builders::TreeShape;

constexpr char kName[] = "static";

// Reads the `choices` of `options` (the builder's own mapping or a choices file).
absl::StatusOr<TreeShape> ShapeFrom(Options& options, bool sampling) {
  ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> choices, options.GetIntListList("choices"));
  if (choices.empty()) return options.Error("choices", "expected at least one path");
  auto shape = tree_builders::ShapeFromChoices(choices);
  if (!shape.ok()) return options.Error("choices", std::string(shape.status().message()));
  if (const int gap = shape->FirstRankGap(); sampling && gap >= 0) {
    return options.Error("choices", absl::StrCat("the children of ", gap == 0 ? std::string("the root")
                                                     : absl::StrCat("path ", tree_builders::FormatPath(shape->path(gap))),
                                                 " skip a rank; with sampling: true rank r is the r-th draw "
                                                 "without replacement, so ranks must be 0..k-1"));
  }
  return shape;
}

absl::StatusOr<std::unique_ptr<TreeBuilder>> Create(Options& options) {
  ASSIGN_OR_RETURN(bool sampling, options.GetBool("sampling", false));
  const bool inline_choices = options.Has("choices"), from_file = options.Has("choices_file");
  if (inline_choices == from_file)
    return options.Error(inline_choices ? "choices_file" : "choices",
                         "give exactly one of 'choices' (a list of rank paths) and 'choices_file'");
  if (inline_choices) {
    ASSIGN_OR_RETURN(TreeShape shape, ShapeFrom(options, sampling));
    return std::unique_ptr<TreeBuilder>(std::make_unique<tree_builders::ShapeTreeBuilder>(kName, std::move(shape),
                                                                                        sampling));
  }
  ASSIGN_OR_RETURN(std::string file, options.GetString("choices_file"));
  auto loaded = Options::FromFile(options.ResolvePath(file));
  if (!loaded.ok()) return options.Error("choices_file", std::string(loaded.status().message()));
  ASSIGN_OR_RETURN(TreeShape shape, ShapeFrom(*loaded, sampling));
  RETURN_IF_ERROR(loaded->CheckAllUsed());
  return std::unique_ptr<TreeBuilder>(std::make_unique<tree_builders::ShapeTreeBuilder>(kName, std::move(shape),
                                                                                        sampling));
}

const bool kRegistered = TreeBuilderRegistry::Add({
    .name = kName,
    .description = "fixed tree from Medusa-style choices; EAGLE-1 top-k per node, or draws without "
                   "replacement with sampling: true (§2.3)",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab
