#include "framework/core/latency_profile.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "framework/core/status_macros.h"

namespace speclab {
namespace {

constexpr int64_t kMaxBudget = 4096;

}  // namespace

double LatencyProfile::TargetMs(int n) const {
  if (budgets.size() == 1 || n <= budgets.front()) return target_ms.front();
  size_t i = 1;
  while (i + 1 < budgets.size() && budgets[i] < n) ++i;
  const double slope = (target_ms[i] - target_ms[i - 1]) / (budgets[i] - budgets[i - 1]);
  return target_ms[i - 1] + slope * (n - budgets[i - 1]);
}

std::vector<double> NonDecreasingFit(const std::vector<double>& values) {
  struct Block {
    double sum;
    int count;
    double mean() const { return sum / count; }
  };
  std::vector<Block> blocks;
  for (double v : values) {
    blocks.push_back({v, 1});
    while (blocks.size() > 1 && blocks[blocks.size() - 2].mean() > blocks.back().mean()) {
      blocks[blocks.size() - 2].sum += blocks.back().sum;
      blocks[blocks.size() - 2].count += blocks.back().count;
      blocks.pop_back();
    }
  }
  std::vector<double> fit;
  for (const Block& block : blocks) fit.insert(fit.end(), block.count, block.mean());
  return fit;
}

absl::StatusOr<Options> InlineOrFile(Options& options, const std::string& key, const std::string& file_key,
                                     bool required) {
  const bool inline_value = options.Has(key), from_file = options.Has(file_key);
  if (inline_value && from_file)
    return options.Error(file_key, absl::StrCat("give either '", key, "' or '", file_key, "', not both"));
  if (!from_file) {
    if (required && !inline_value) return options.Error(key, absl::StrCat("missing (or give '", file_key, "')"));
    return options;
  }
  ASSIGN_OR_RETURN(std::string file, options.GetString(file_key));
  auto loaded = Options::FromFile(options.ResolvePath(file));
  if (!loaded.ok()) return options.Error(file_key, std::string(loaded.status().message()));
  if (!loaded->Has(key)) return options.Error(file_key, absl::StrCat(file, " has no '", key, "' key"));
  return *loaded;
}

absl::StatusOr<LatencyProfile> ReadLatencyProfile(Options& options) {
  ASSIGN_OR_RETURN(Options source, InlineOrFile(options, "latency_profile", "latency_profile_file", true));
  ASSIGN_OR_RETURN(Options map, source.GetMap("latency_profile"));
  LatencyProfile profile;
  ASSIGN_OR_RETURN(std::vector<int64_t> budgets, map.GetIntList("budgets"));
  ASSIGN_OR_RETURN(profile.target_ms, map.GetDoubleList("target_ms"));
  ASSIGN_OR_RETURN(profile.draft_ms, map.GetDouble("draft_ms"));
  RETURN_IF_ERROR(map.CheckAllUsed());
  if (budgets.empty() || budgets.size() != profile.target_ms.size())
    return map.Error("target_ms", absl::StrCat("expected one time per budget (", budgets.size(), " budgets, ",
                                               profile.target_ms.size(), " times)"));
  for (size_t i = 0; i < budgets.size(); ++i) {
    if (budgets[i] < 1 || budgets[i] > kMaxBudget || (i > 0 && budgets[i] <= budgets[i - 1]))
      return map.Error("budgets", absl::StrCat("expected increasing token counts in [1, ", kMaxBudget, "]"));
    if (!(profile.target_ms[i] > 0)) return map.Error("target_ms", "expected positive times");
    profile.budgets.push_back(static_cast<int>(budgets[i]));
  }
  if (!(profile.draft_ms >= 0)) return map.Error("draft_ms", "expected a time >= 0");
  profile.target_ms = NonDecreasingFit(profile.target_ms);
  return profile;
}

}  // namespace speclab
