// Helpers for tree-builder tests: create a builder from YAML and run one
// Build() outside the engine, the way the engine calls it.
#ifndef SPECLAB_ALGORITHMS_TREE_BUILDERS_TESTING_BUILDER_HARNESS_H_
#define SPECLAB_ALGORITHMS_TREE_BUILDERS_TESTING_BUILDER_HARNESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace tree_builders {

// Creates the builder described by `yaml` ({type: ..., options}); errors
// name `file`, as a config's would.
absl::StatusOr<std::unique_ptr<TreeBuilder>> BuilderFromYaml(const std::string& yaml,
                                                            const std::string& file = "builder.yaml");

struct BuildSettings {
  int32_t root_token = 1;
  SamplingParams sampling;  // temperature 1 by default
  int gamma = 4;            // the fixed length policy's bound
  uint64_t seed = 0;        // drafting generator
};

// BeginStep + Build on the CPU, like one engine step.
absl::StatusOr<DraftTree> BuildOnce(TreeBuilder& builder, Drafter& drafter, const BuildSettings& settings);

// The authoritative tokens (DraftTree::tokens) on the host, root first.
std::vector<int32_t> HostTokens(const DraftTree& draft);

// Token path root..node from the authoritative tokens.
std::vector<int32_t> PathTokens(const DraftTree& draft, int node);

}  // namespace tree_builders
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_TREE_BUILDERS_TESTING_BUILDER_HARNESS_H_
