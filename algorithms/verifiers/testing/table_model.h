// Table "models" for exact verifier tests (docs/algorithms.md §0.4).
//
// A TableModel maps a context (the token path from the root, root included)
// to a distribution over a small vocabulary. Rows are random Dirichlet draws
// derived deterministically from (seed, salt, context), so two models with
// the same seed agree and no table has to be materialised up front. A
// one-hot model puts all mass on the Dirichlet row's argmax (temperature 0).
// A constant model returns one fixed row for every context.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_TESTING_TABLE_MODEL_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_TESTING_TABLE_MODEL_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace speclab {
namespace enumeration {

struct TableModelSpec {
  int vocab = 3;
  uint64_t seed = 1;
  double concentration = 1.0;        // Dirichlet(concentration, ..., concentration)
  bool one_hot = false;              // temperature 0: one-hot on the row's argmax
  bool float32 = false;              // round entries to float, as the engine's rows are (sums off by ~1e-7)
  std::vector<double> constant_row;  // when set: this row for every context
};

class TableModel {
 public:
  explicit TableModel(TableModelSpec spec);

  int vocab() const { return spec_.vocab; }
  const TableModelSpec& spec() const { return spec_; }

  // The row for `context`; `salt` selects one of several drafters (0 = default).
  // The reference stays valid for the model's lifetime.
  const std::vector<double>& Row(const std::vector<int32_t>& context, int salt = 0) const;

 private:
  std::vector<double> MakeRow(const std::vector<int32_t>& context, int salt) const;

  TableModelSpec spec_;
  mutable std::map<std::pair<int, std::vector<int32_t>>, std::vector<double>> cache_;
};

}  // namespace enumeration
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_TESTING_TABLE_MODEL_H_
