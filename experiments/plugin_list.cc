#include "experiments/plugin_list.h"

#include <vector>

#include "absl/strings/str_format.h"
#include "framework/core/length_policy.h"
#include "framework/core/verifier_registry.h"
#include "framework/drafter.h"
#include "framework/tree_builder.h"

namespace speclab {
namespace {

struct Line {
  std::string category, name, lossless, description;
};

template <typename RegistryType>
void Append(const std::string& category, std::vector<Line>& lines) {
  for (const auto* entry : RegistryType::List())
    lines.push_back({category, entry->name, entry->lossless, entry->description});
}

}  // namespace

std::string FormatPluginList(bool tsv) {
  std::vector<Line> lines;
  Append<DrafterRegistry>("drafter", lines);
  Append<TreeBuilderRegistry>("tree_builder", lines);
  Append<VerifierRegistry>("verifier", lines);
  Append<LengthPolicyRegistry>("length_policy", lines);
  std::string out;
  if (!tsv) absl::StrAppendFormat(&out, "%-14s %-16s %-9s %s\n", "CATEGORY", "NAME", "LOSSLESS", "DESCRIPTION");
  for (const Line& l : lines) {
    if (tsv) {
      absl::StrAppendFormat(&out, "%s\t%s\t%s\t%s\n", l.category, l.name, l.lossless, l.description);
    } else {
      absl::StrAppendFormat(&out, "%-14s %-16s %-9s %s\n", l.category, l.name, l.lossless, l.description);
    }
  }
  return out;
}

}  // namespace speclab
