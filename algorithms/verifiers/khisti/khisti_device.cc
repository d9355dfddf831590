#include "algorithms/verifiers/khisti/khisti_device.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/verifiers/common/sampled_tree_rule.h"
#include "algorithms/verifiers/common/tree_on_device.h"
#include "algorithms/verifiers/khisti/khisti_options.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_verifier.h"
#include "framework/device/kernel_launch.h"
#include "framework/sampling.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "algorithms/verifiers/khisti/cuda/canonical_tree.h"
#endif

namespace speclab::khisti {
namespace {

constexpr char kName[] = "khisti";
constexpr int kLawLanes = 256;  // the kernel sums a y's tuples a block of 256 threads at a time

#ifdef SPECLAB_WITH_CUDA
static_assert(kDeviceMaxSupport == canonical_kernels::kMaxSupport && kDeviceMaxDrafts == canonical_kernels::kMaxDrafts);
#endif

int64_t Race(const float* law, const float* noise, int64_t vocab) {
  int64_t best = 0;
  float best_value = -1.0f;
  for (int64_t x = 0; x < vocab; ++x) {
    const float value = law[x] / std::max(noise[x], FLT_MIN);
    if (value > best_value) {
      best_value = value;
      best = x;
    }
  }
  return best;
}

// r on q's support (index order) at K >= 2, as the kernel sums it: tail
// tuples dealt to 256 partial sums in turn, then their butterfly.
std::vector<float> SupportLaw(const std::vector<float>& q, const std::vector<float>& w, int k) {
  const int64_t s = static_cast<int64_t>(q.size());
  int64_t tails = 1;
  for (int i = 1; i < k; ++i) tails *= s;
  std::vector<float> law(s);
  std::vector<int64_t> digits(k);
  for (int64_t j = 0; j < s; ++j) {
    std::vector<float> lanes(kLawLanes, 0.0f);
    for (int64_t t = 0; t < tails; ++t) {
      float probability = 1.0f, weights = w[j];
      int distinct = 1, copies = 1;
      int64_t rest = t;
      for (int i = 0; i + 1 < k; ++i) {
        const int64_t d = rest % s;
        rest /= s;
        digits[i] = d;
        probability *= q[d];
        if (d == j) {
          ++copies;
          continue;
        }
        if (std::find(digits.begin(), digits.begin() + i, d) == digits.begin() + i) {
          ++distinct;
          weights += w[d];
        }
      }
      const float alpha = weights > 0.0f ? w[j] / weights : 1.0f / static_cast<float>(distinct);
      lanes[t % kLawLanes] += probability * alpha / static_cast<float>(copies);
    }
    for (int offset = kLawLanes / 2; offset > 0; offset /= 2) {
      std::vector<float> next(kLawLanes);
      for (int l = 0; l < kLawLanes; ++l) next[l] = lanes[l] + lanes[l ^ offset];
      lanes = std::move(next);
    }
    law[j] = static_cast<float>(k) * q[j] * lanes[0];
  }
  return law;
}

// Node u's decision (the accepted child, or -1 with *extra set), as the kernel's.
int64_t Decide(int64_t u, const std::vector<int64_t>& kids, const int64_t* tokens, const float* pu, const float* qs,
               const float* uniforms, const float* noise, double max_selection_tuples, int64_t vocab,
               int64_t* extra) {
  const int k = static_cast<int>(kids.size());
  if (k == 0) {
    *extra = Race(pu, noise, vocab);
    return -1;
  }
  std::vector<int64_t> support;
  std::vector<float> support_q, support_w, law;
  if (k >= 2) {
    for (int64_t x = 0; x < vocab; ++x)
      if (qs[x] > 0.0f) support.push_back(x);
    const int64_t s = static_cast<int64_t>(support.size());
    if (k > kDeviceMaxDrafts || s > kDeviceMaxSupport || std::pow(static_cast<double>(s), k) > max_selection_tuples ||
        std::pow(static_cast<double>(s), k - 1) >= 2147483648.0) {  // the kernel's 32-bit tail count
      *extra = Race(pu, noise, vocab);
      return -1;
    }
    for (int64_t x : support) {
      support_q.push_back(qs[x]);
      support_w.push_back(pu[x] / qs[x]);
    }
    law = SupportLaw(support_q, support_w, k);
  }
  std::vector<int64_t> distinct;
  std::vector<float> weight;
  float total = 0.0f;
  for (int64_t c : kids) {
    const int64_t x = tokens[c];
    if (std::find(distinct.begin(), distinct.end(), x) != distinct.end()) continue;
    distinct.push_back(x);
    weight.push_back(qs[x] > 0.0f ? pu[x] / qs[x] : 0.0f);
    total += weight.back();
  }
  if (!(total > 0.0f)) {
    std::fill(weight.begin(), weight.end(), 1.0f);
    total = static_cast<float>(weight.size());
  }
  const float target = uniforms[2 * u] * total;
  size_t pick = distinct.size() - 1;
  float cumulative = 0.0f;
  for (size_t e = 0; e < distinct.size(); ++e) {
    cumulative += weight[e];
    if (target < cumulative) {
      pick = e;
      break;
    }
  }
  const int64_t y = distinct[pick];
  float r = 0.0f;
  if (k == 1) {
    r = qs[y];
  } else {
    for (size_t j = 0; j < support.size(); ++j)
      if (support[j] == y) r = law[j];
  }
  if (pu[y] > 0.0f && r > 0.0f && uniforms[2 * u + 1] * r < pu[y])
    for (int64_t c : kids)
      if (tokens[c] == y) return c;
  std::vector<float> residual(vocab);
  float mass = 0.0f;
  for (int64_t x = 0; x < vocab; ++x) residual[x] = k == 1 ? std::max(pu[x] - qs[x], 0.0f) : pu[x];
  for (size_t j = 0; j < support.size(); ++j) residual[support[j]] = std::max(pu[support[j]] - law[j], 0.0f);
  for (float v : residual) mass += v;
  *extra = mass > 0.0f ? Race(residual.data(), noise, vocab) : Race(pu, noise, vocab);
  return -1;
}

at::Tensor WalkOnHost(const at::Tensor& parents_in, const at::Tensor& tokens_in, const at::Tensor& p_in,
                      const at::Tensor& q_in, const at::Tensor& uniforms_in, const at::Tensor& noise_in,
                      double max_selection_tuples) {
  const auto host = [](const at::Tensor& t) { return t.to(at::kCPU).contiguous(); };
  const at::Tensor parents_t = host(parents_in), tokens_t = host(tokens_in), p_t = host(p_in), q_t = host(q_in),
                   uniforms_t = host(uniforms_in), noise_t = host(noise_in);
  const int64_t* parents = parents_t.data_ptr<int64_t>();
  const int64_t n = parents_t.size(0), vocab = p_t.size(1);
  std::vector<std::vector<int64_t>> kids(n);
  for (int64_t c = 1; c < n; ++c) kids[parents[c]].push_back(c);
  at::Tensor out = at::zeros({n + 1}, at::TensorOptions().dtype(at::kLong));
  int64_t* o = out.data_ptr<int64_t>();
  for (int64_t node = 0;;) {
    const float* qs = q_t.data_ptr<float>() + (kids[node].empty() ? 0 : kids[node].front()) * vocab;
    const int64_t next =
        Decide(node, kids[node], tokens_t.data_ptr<int64_t>(), p_t.data_ptr<float>() + node * vocab, qs,
               uniforms_t.data_ptr<float>(), noise_t.data_ptr<float>(), max_selection_tuples, vocab, &o[n]);
    if (next < 0) break;
    o[++o[0]] = node = next;
  }
  return out.to(parents_in.device());
}

// The device form: a chain is a tree (K = 1 a node: r = q, chain rejection
// sampling).
class KhistiOnDevice final : public verifiers::SampledTreeRule {
 public:
  explicit KhistiOnDevice(double max_selection_tuples)
      : SampledTreeRule(kName, {DraftSampling::kIndependent}, /*uniforms_per_node=*/2),
        max_selection_tuples_(max_selection_tuples) {}
  bool verifies_prefixes_alone() const override { return true; }  // a chain from the root down

 private:
  at::Tensor Walk(const DeviceTreeProblem& problem, const at::Tensor& parents, const at::Tensor& tokens,
                  const at::Tensor& q, const at::Tensor& uniforms, const at::Tensor& noise) const override {
    return CanonicalTreeWalk(parents, tokens, problem.target_probs, q, uniforms, noise, max_selection_tuples_);
  }

  // Refuses trees whose widest node may need more than the exact selection
  // law can take, from what the host knows (no read of the device).
  absl::Status CheckDrafts(const DeviceTreeProblem& problem) const override {
    const int64_t n = problem.tokens.size(0), vocab = problem.target_probs.size(1);
    const int64_t k = problem.branching_bound >= 0 ? std::min(problem.branching_bound, n - 1) : n - 1;
    const int64_t s = problem.draft_support_bound >= 1 ? std::min(problem.draft_support_bound, vocab) : vocab;
    if (k < 2) return absl::OkStatus();
    const double tuples = std::pow(static_cast<double>(s), static_cast<double>(k));
    if (k <= kDeviceMaxDrafts && s <= kDeviceMaxSupport && tuples <= max_selection_tuples_ &&
        tuples / static_cast<double>(s) < 2147483648.0)
      return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        kName, " (device): up to K = ", k, " drafts of a node share a q row of up to ", s,
        problem.draft_support_bound >= 1 ? " tokens (the drafts' top_k)" : " tokens (the vocabulary: no top_k)",
        "; the exact selection law sums |supp q|^K = ", tuples, " tuples, and takes at most max_selection_tuples = ",
        max_selection_tuples_, ", ", kDeviceMaxSupport, " tokens of support and ", kDeviceMaxDrafts,
        " drafts a node on the device. Draft with a top_k (decoding.top_k, or the method's draft_sampling.top_k) "
        "such that top_k^K <= max_selection_tuples, or fewer drafts a node"));
  }

  double max_selection_tuples_;
};

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = kName,
     .description = "Khisti canonical two-step on the device: the selection law a block a support token, then a block a node (§1.8)",
     .lossless = "lossless",
     .create = [](Options& options) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       ASSIGN_OR_RETURN(double limit, ReadMaxSelectionTuples(options));
       ASSIGN_OR_RETURN(Selection selection, ReadSelection(options));
       if (selection == Selection::kOptimal)
         return absl::UnimplementedError(
             "selection: optimal solves a maximum flow at each node on the host; the device form selects by p/q");
       return std::make_unique<KhistiOnDevice>(limit);
     }});

}  // namespace

at::Tensor CanonicalTreeWalk(const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& p,
                             const at::Tensor& q, const at::Tensor& uniforms, const at::Tensor& noise,
                             double max_selection_tuples) {
  const int64_t n = verifiers::CheckWalkInputs("CanonicalTreeWalk", parents, tokens, p, q, uniforms, 2, noise);
#ifdef SPECLAB_WITH_CUDA
  namespace kernels = canonical_kernels;
  if (kernel_launch::FloatRows(p) && kernel_launch::FloatRows(q) && kernel_launch::FloatVector(uniforms) &&
      kernel_launch::FloatVector(noise) && n <= kernels::kMaxNodes) {
    const c10::cuda::CUDAGuard guard(p.device());
    const at::Tensor up = parents.contiguous(), ids = tokens.contiguous();
    at::Tensor scratch = at::empty({2, n}, parents.options());
    at::Tensor laws = at::empty({n, kernels::kMaxSupport}, p.options());
    at::Tensor out = at::empty({n + 1}, parents.options());
    kernel_launch::Check(
        kernels::LaunchCanonicalTree(up.data_ptr<int64_t>(), ids.data_ptr<int64_t>(), p.data_ptr<float>(),
                                     q.data_ptr<float>(), uniforms.data_ptr<float>(), noise.data_ptr<float>(),
                                     max_selection_tuples, laws.data_ptr<float>(), scratch[0].data_ptr<int64_t>(),
                                     scratch[1].data_ptr<int64_t>(), out.data_ptr<int64_t>(), n, p.size(1),
                                     kernel_launch::Stream(p)),
        "CanonicalTreeWalk");
    return out;
  }
#endif
  return WalkOnHost(parents, tokens, p, q, uniforms, noise, max_selection_tuples);
}

}  // namespace speclab::khisti
