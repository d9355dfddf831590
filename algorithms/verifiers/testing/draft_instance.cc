#include "algorithms/verifiers/testing/draft_instance.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace speclab {
namespace enumeration {
namespace {

// The law of the next sibling drawn without replacement after `earlier`.
std::vector<double> WithoutEarlier(const std::vector<double>& q, const std::vector<int32_t>& earlier) {
  std::vector<double> out = q;
  for (int32_t token : earlier) out[token] = 0.0;
  return out;
}

std::vector<int32_t> TopTokens(const std::vector<double>& q, int count) {
  std::vector<int32_t> order(q.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return q[a] > q[b]; });
  order.resize(std::min<size_t>(count, order.size()));
  return order;
}

std::vector<double> OneHot(int vocab, int32_t token) {
  std::vector<double> row(vocab, 0.0);
  row[token] = 1.0;
  return row;
}

// Appends the children of `parent` and the rows they were drawn from.
absl::Status DraftChildren(const Instance& instance, const TableModel& draft_model, int parent, int count,
                           RandomSource& random, DraftedTree& drafted) {
  const std::vector<int32_t> context = drafted.tree.PathTokens(parent);
  const std::vector<double>& q = draft_model.Row(context);
  std::vector<int32_t> earlier;
  const std::vector<int32_t> top = TopTokens(q, count);
  for (int j = 0; j < count; ++j) {
    int32_t token = 0;
    std::vector<double> row = q;
    switch (instance.mode) {
      case DraftMode::kIndependent:
        token = random.Categorical(q);
        break;
      case DraftMode::kPerChildIndependent:
        row = draft_model.Row(context, j + 1);
        token = random.Categorical(row);
        break;
      case DraftMode::kWithoutReplacement: {
        const std::vector<double> masked = WithoutEarlier(q, earlier);
        if (!(std::accumulate(masked.begin(), masked.end(), 0.0) > 0.0))
          return absl::InvalidArgumentError("more siblings than tokens to draw without replacement");
        token = random.Categorical(masked);
        break;
      }
      case DraftMode::kTopK:
      case DraftMode::kTopKOneHot:
        if (j >= static_cast<int>(top.size())) return absl::InvalidArgumentError("top-k wider than the vocabulary");
        token = top[j];
        if (instance.mode == DraftMode::kTopKOneHot) row = OneHot(draft_model.vocab(), token);
        break;
    }
    earlier.push_back(token);
    drafted.tree.AddNode(parent, token);
    drafted.rows.push_back(std::move(row));
  }
  return absl::OkStatus();
}

}  // namespace

const char* DraftModeName(DraftMode mode) {
  switch (mode) {
    case DraftMode::kIndependent:
      return "independent";
    case DraftMode::kPerChildIndependent:
      return "per-child independent";
    case DraftMode::kWithoutReplacement:
      return "without replacement";
    case DraftMode::kTopK:
      return "top-k";
    case DraftMode::kTopKOneHot:
      return "top-k one-hot q";
  }
  return "unknown";
}

DraftSampling TrueSampling(DraftMode mode) {
  switch (mode) {
    case DraftMode::kIndependent:
    case DraftMode::kPerChildIndependent:
    case DraftMode::kTopKOneHot:
      return DraftSampling::kIndependent;
    case DraftMode::kWithoutReplacement:
      return DraftSampling::kWithoutReplacement;
    case DraftMode::kTopK:
      return DraftSampling::kDeterministic;
  }
  return DraftSampling::kDeterministic;
}

std::string Instance::Describe() const {
  std::string out = absl::StrCat(name.empty() ? "" : name + " ", "[", absl::StrJoin(branching, ","), "] ",
                                 DraftModeName(mode), " V=", vocab(), " seeds=", target.seed, "/", draft.seed);
  if (target.one_hot) absl::StrAppend(&out, " p one-hot");
  if (draft.one_hot) absl::StrAppend(&out, " q one-hot");
  if (declared_sampling.has_value()) absl::StrAppend(&out, " (declared otherwise)");
  return out;
}

absl::StatusOr<DraftedTree> DraftTree(const Instance& instance, const TableModel& draft_model, RandomSource& random) {
  DraftedTree drafted;
  drafted.tree = TokenTree(instance.root_token);
  drafted.rows.emplace_back();  // the root was not drafted
  std::vector<int> level = {0};
  for (int count : instance.branching) {
    std::vector<int> next;
    for (int parent : level) {
      const int first = drafted.tree.size();
      if (auto status = DraftChildren(instance, draft_model, parent, count, random, drafted); !status.ok())
        return status;
      for (int node = first; node < drafted.tree.size(); ++node) next.push_back(node);
    }
    level = std::move(next);
  }
  return drafted;
}

VerificationProblem MakeProblem(const Instance& instance, const TableModel& target_model, const DraftedTree& drafted) {
  const TokenTree& tree = drafted.tree;
  const int n = tree.size();
  const int vocab = target_model.vocab();
  VerificationProblem problem;
  problem.tree = &tree;
  problem.target = ProbabilityRows(n, vocab);
  problem.target_argmax.resize(n);
  for (int node = 0; node < n; ++node) {
    const std::vector<double>& p = target_model.Row(tree.PathTokens(node));
    std::copy(p.begin(), p.end(), problem.target.mutable_row(node).begin());
    problem.target_argmax[node] = static_cast<int32_t>(std::max_element(p.begin(), p.end()) - p.begin());
  }
  problem.sampling = instance.declared_sampling.value_or(TrueSampling(instance.mode));
  if (problem.sampling != DraftSampling::kDeterministic) {
    problem.draft = ProbabilityRows(n, vocab);
    for (int node = 1; node < n; ++node)
      std::copy(drafted.rows[node].begin(), drafted.rows[node].end(), problem.draft.mutable_row(node).begin());
  }
  return problem;
}

}  // namespace enumeration
}  // namespace speclab
