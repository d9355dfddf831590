#include "algorithms/verifiers/khisti/canonical_selection.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <queue>

namespace speclab {
namespace verifiers {

namespace {

// The importance weight p(x)/q(x) of a drafted token (0 if q(x) = 0: it
// cannot have been drafted).
double ImportanceWeight(absl::Span<const double> p, absl::Span<const double> q, int32_t x) {
  return q[x] > 0.0 ? p[x] / q[x] : 0.0;
}

// Maximum flow by shortest augmenting paths (Edmonds-Karp) on a small
// graph of real capacities; residuals below `kTiny` count as saturated.
class MaxFlow {
 public:
  explicit MaxFlow(int nodes) : out_(nodes) {}

  // An edge from -> to of capacity `capacity`; returns its index.
  int AddEdge(int from, int to, double capacity) {
    out_[from].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({to, capacity});
    out_[to].push_back(static_cast<int>(edges_.size()));
    edges_.push_back({from, 0.0});
    return static_cast<int>(edges_.size()) - 2;
  }

  void Run(int source, int sink) {
    std::vector<int> via(out_.size());
    while (true) {
      std::fill(via.begin(), via.end(), -1);
      std::queue<int> frontier;
      frontier.push(source);
      while (!frontier.empty() && via[sink] < 0) {
        const int u = frontier.front();
        frontier.pop();
        for (int e : out_[u]) {
          const int v = edges_[e].to;
          if (v != source && via[v] < 0 && edges_[e].capacity > kTiny) {
            via[v] = e;
            frontier.push(v);
          }
        }
      }
      if (via[sink] < 0) return;
      double push = std::numeric_limits<double>::infinity();
      for (int v = sink; v != source; v = edges_[via[v] ^ 1].to) push = std::min(push, edges_[via[v]].capacity);
      for (int v = sink; v != source; v = edges_[via[v] ^ 1].to) {
        edges_[via[v]].capacity -= push;
        edges_[via[v] ^ 1].capacity += push;
      }
    }
  }

  // The flow an AddEdge edge carries: its reverse edge's residual.
  double Flow(int edge) const { return edges_[edge ^ 1].capacity; }

 private:
  static constexpr double kTiny = 1e-300;
  struct Edge {
    int to;
    double capacity;
  };
  std::vector<std::vector<int>> out_;
  std::vector<Edge> edges_;
};

}  // namespace

std::vector<double> SelectionWeights(absl::Span<const double> p, absl::Span<const double> q,
                                     absl::Span<const int32_t> distinct_tokens) {
  std::vector<double> weights(distinct_tokens.size(), 0.0);
  double total = 0;
  for (size_t i = 0; i < distinct_tokens.size(); ++i) {
    weights[i] = ImportanceWeight(p, q, distinct_tokens[i]);
    total += weights[i];
  }
  // No drafted token is possible under p: any fixed rule is exact, take uniform.
  if (!(total > 0.0)) std::fill(weights.begin(), weights.end(), 1.0);
  return weights;
}

double SelectionTupleCount(absl::Span<const double> q, int k) {
  const double support = static_cast<double>(std::count_if(q.begin(), q.end(), [](double v) { return v > 0.0; }));
  return std::pow(support, k);
}

std::vector<double> SelectionLaw(absl::Span<const double> p, absl::Span<const double> q, int k) {
  std::vector<int32_t> support;
  for (size_t x = 0; x < q.size(); ++x)
    if (q[x] > 0.0) support.push_back(static_cast<int32_t>(x));
  std::vector<double> law(q.size(), 0.0);
  if (support.empty() || k <= 0) return law;
  std::vector<double> weight(q.size(), 0.0);
  for (int32_t x : support) weight[x] = ImportanceWeight(p, q, x);
  // Odometer over support^k.
  std::vector<int> digits(k, 0);
  std::vector<int32_t> distinct;
  distinct.reserve(k);
  while (true) {
    double probability = 1.0;
    distinct.clear();
    for (int d : digits) {
      const int32_t x = support[d];
      probability *= q[x];
      if (std::find(distinct.begin(), distinct.end(), x) == distinct.end()) distinct.push_back(x);
    }
    // SelectionWeights inlined: this loop runs s^K times and must not allocate.
    double total = 0;
    for (int32_t x : distinct) total += weight[x];
    for (int32_t x : distinct)
      law[x] += total > 0.0 ? probability * weight[x] / total : probability / static_cast<double>(distinct.size());
    int position = 0;
    while (position < k && ++digits[position] == static_cast<int>(support.size())) digits[position++] = 0;
    if (position == k) break;
  }
  return law;
}

OptimizedSelection OptimizeSelection(absl::Span<const double> p, absl::Span<const double> q, int k) {
  OptimizedSelection out;
  out.law.assign(q.size(), 0.0);
  std::vector<int32_t> support;
  for (size_t x = 0; x < q.size(); ++x)
    if (q[x] > 0.0) support.push_back(static_cast<int32_t>(x));
  if (support.empty() || k <= 0) return out;
  // P(S) for every set of distinct tokens K i.i.d. draws can give (odometer over support^K).
  std::map<std::vector<int32_t>, double> sets;
  std::vector<int> digits(k, 0);
  std::vector<int32_t> distinct;
  while (true) {
    double probability = 1.0;
    distinct.clear();
    for (int d : digits) {
      probability *= q[support[d]];
      distinct.push_back(support[d]);
    }
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    sets[distinct] += probability;
    int position = 0;
    while (position < k && ++digits[position] == static_cast<int>(support.size())) digits[position++] = 0;
    if (position == k) break;
  }
  // Nodes: the source, one per set, one per support token, the sink.
  const int source = 0, first_set = 1, first_token = first_set + static_cast<int>(sets.size());
  const int sink = first_token + static_cast<int>(support.size());
  MaxFlow flow(sink + 1);
  auto token_node = [&](int32_t x) {
    return first_token + static_cast<int>(std::lower_bound(support.begin(), support.end(), x) - support.begin());
  };
  std::vector<std::vector<int>> set_edges;
  int node = first_set;
  for (const auto& [set, probability] : sets) {
    flow.AddEdge(source, node, probability);
    std::vector<int> edges;
    for (int32_t x : set) edges.push_back(flow.AddEdge(node, token_node(x), probability));
    set_edges.push_back(std::move(edges));
    ++node;
  }
  for (int32_t x : support) flow.AddEdge(token_node(x), sink, p[x]);
  flow.Run(source, sink);
  size_t index = 0;
  for (const auto& [set, probability] : sets) {
    std::vector<double> weights(set.size(), 0.0);
    double flowed = 0;
    for (size_t i = 0; i < set.size(); ++i) {
      weights[i] = std::max(0.0, flow.Flow(set_edges[index][i]));
      flowed += weights[i];
    }
    size_t largest = 0;
    for (size_t i = 1; i < set.size(); ++i)
      if (p[set[i]] > p[set[largest]]) largest = i;
    weights[largest] += std::max(0.0, probability - flowed);
    double total = 0;
    for (double w : weights) total += w;
    for (size_t i = 0; i < set.size(); ++i) {
      weights[i] = total > 0.0 ? weights[i] / total : 1.0 / static_cast<double>(set.size());
      out.law[set[i]] += probability * weights[i];
    }
    out.weights.emplace(set, std::move(weights));
    ++index;
  }
  return out;
}

}  // namespace verifiers
}  // namespace speclab
