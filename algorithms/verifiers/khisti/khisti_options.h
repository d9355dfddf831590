// Khisti's options, shared by its host rule and its device form (§1.8).
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_KHISTI_OPTIONS_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_KHISTI_OPTIONS_H_

#include "absl/status/statusor.h"
#include "framework/core/options.h"

namespace speclab::khisti {

// `max_selection_tuples` (default 1e7, at least 1): the most K-tuples
// |supp q|^K the exact selection law may enumerate at a node; beyond it
// the rule refuses. Errors name the key.
absl::StatusOr<double> ReadMaxSelectionTuples(Options& options);

// How step 1 selects among the drafted tokens (canonical_selection.h).
enum class Selection {
  kImportance,  // α ∝ p/q: a fixed weighting, below the optimum
  kOptimal,     // OptimizeSelection: the optimum acceptance, host rule only
};

// `selection`: "importance" (the default) or "optimal". Errors name the key.
absl::StatusOr<Selection> ReadSelection(Options& options);

}  // namespace speclab::khisti

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_KHISTI_OPTIONS_H_
