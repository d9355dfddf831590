#include "algorithms/verifiers/khisti/khisti_options.h"

#include <string>

#include "framework/core/status_macros.h"

namespace speclab::khisti {

absl::StatusOr<double> ReadMaxSelectionTuples(Options& options) {
  ASSIGN_OR_RETURN(double limit, options.GetDouble("max_selection_tuples", 1e7));
  if (!(limit >= 1.0)) return options.Error("max_selection_tuples", "expected a number >= 1");
  return limit;
}

absl::StatusOr<Selection> ReadSelection(Options& options) {
  ASSIGN_OR_RETURN(std::string selection, options.GetString("selection", "importance"));
  if (selection == "importance") return Selection::kImportance;
  if (selection == "optimal") return Selection::kOptimal;
  return options.Error("selection", "expected importance or optimal, got '" + selection + "'");
}

}  // namespace speclab::khisti
