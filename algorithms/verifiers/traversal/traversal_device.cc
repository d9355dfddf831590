#include "algorithms/verifiers/traversal/traversal_device.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cfloat>
#include <exception>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/verifiers/common/sampled_tree_rule.h"
#include "algorithms/verifiers/common/tree_on_device.h"
#include "framework/core/status_macros.h"
#include "framework/device/device_verifier.h"
#include "framework/device/kernel_launch.h"
#include "framework/sampling.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "algorithms/verifiers/traversal/cuda/traversal_walk.h"
#endif

namespace speclab::traversal {
namespace {

constexpr char kName[] = "traversal";

float AcceptProbability(float numerator, float denominator) {
  if (denominator <= 0.0f || numerator <= 0.0f) return 0.0f;
  return numerator >= denominator ? 1.0f : numerator / denominator;
}

// The kernel's walk on the host, in float32 and in its order.
class HostWalk {
 public:
  HostWalk(const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& p, const at::Tensor& q, bool masked)
      : n_(parents.size(0)),
        vocab_(p.size(1)),
        masked_(masked),
        p_(p.data_ptr<float>()),
        q_(q.data_ptr<float>()),
        parent_(n_, -1),
        children_(n_),
        token_(tokens.data_ptr<int64_t>(), tokens.data_ptr<int64_t>() + n_),
        alive_(n_, true),
        own_row_(n_, false),
        alpha_(n_, 1.0f),
        scale_(n_, 1.0f),
        at_parent_(n_, 0.0f),
        q_at_(n_, 0.0f),
        tried_mass_(n_, 0.0f),
        residual_(static_cast<size_t>(n_ * vocab_)) {
    for (int64_t c = 1; c < n_; ++c) {
      parent_[c] = parents.data_ptr<int64_t>()[c];
      children_[parent_[c]].push_back(c);
    }
    for (int64_t c = 1; c < n_; ++c) {
      q_at_[c] = q_[children_[parent_[c]].front() * vocab_ + token_[c]];
      at_parent_[c] = p_[parent_[c] * vocab_ + token_[c]];
    }
    RecomputeSubtree(0);
  }

  at::Tensor Run(const float* uniforms, const float* noise) {
    int64_t v = 0;
    for (int test = 0;; ++test) {
      v = FirstLeaf();
      if (v == 0 || uniforms[test] < alpha_[v]) break;
      Reject(v);
    }
    at::Tensor out = at::zeros({n_ + 1}, at::TensorOptions().dtype(at::kLong));
    int64_t* o = out.data_ptr<int64_t>();
    std::vector<int64_t> path;
    for (int64_t w = v; w != 0; w = parent_[w]) path.push_back(w);
    o[0] = static_cast<int64_t>(path.size());
    std::reverse_copy(path.begin(), path.end(), o + 1);
    const float* law = Row(v);
    float best = -1.0f;
    for (int64_t x = 0; x < vocab_; ++x) {
      const float key = law[x] / std::max(noise[x], FLT_MIN);
      if (key > best) {
        best = key;
        o[n_] = x;
      }
    }
    return out;
  }

 private:
  const float* Row(int64_t u) const { return (own_row_[u] ? residual_.data() : p_) + u * vocab_; }
  bool TriedAt(int64_t u, int64_t token) const {
    for (int64_t c : children_[u])
      if (!alive_[c] && token_[c] == token) return true;
    return false;
  }
  float MaskScale(int64_t u) const {
    if (!masked_) return 1.0f;
    const float keep = 1.0f - tried_mass_[u];
    return keep > 0.0f ? 1.0f / keep : 0.0f;
  }
  void RecomputeSubtree(int64_t u) {
    std::vector<bool> in_subtree(n_, false);
    in_subtree[u] = true;
    for (int64_t c = u + 1; c < n_; ++c) {
      const int64_t up = parent_[c];
      in_subtree[c] = alive_[c] && up >= u && in_subtree[up];
      if (!in_subtree[c]) continue;
      const float tested = masked_ && TriedAt(up, token_[c]) ? 0.0f : q_at_[c] * MaskScale(up);
      alpha_[c] = AcceptProbability(alpha_[up] * at_parent_[c], tested);
    }
  }
  int64_t FirstLeaf() const {
    int64_t v = 0;
    for (bool descended = true; descended;) {
      descended = false;
      for (int64_t c : children_[v]) {
        if (alive_[c]) {
          v = c;
          descended = true;
          break;
        }
      }
    }
    return v;
  }
  void Reject(int64_t v) {
    const int64_t u = parent_[v];
    std::vector<int64_t> tried;
    for (int64_t c : children_[u])
      if (masked_ && !alive_[c]) tried.push_back(token_[c]);
    const float* src = Row(u);
    const float* shared_q = q_ + children_[u].front() * vocab_;
    const float weight = alpha_[u] * scale_[u], mask_scale = MaskScale(u);
    std::vector<float> r(vocab_);
    float mass = 0.0f;
    for (int64_t x = 0; x < vocab_; ++x) {
      const bool was_tried = std::find(tried.begin(), tried.end(), x) != tried.end();
      r[x] = std::max(weight * src[x] - (was_tried ? 0.0f : shared_q[x] * mask_scale), 0.0f);
      mass += r[x];
    }
    if (mass > 0.0f) std::copy(r.begin(), r.end(), residual_.begin() + u * vocab_);
    const float denominator = mass + 1.0f - alpha_[u];
    alpha_[u] = denominator > 0.0f ? mass / denominator : 1.0f;
    if (mass > 0.0f) {
      own_row_[u] = true;
      scale_[u] = 1.0f / mass;
    }
    if (masked_ && !TriedAt(u, token_[v])) tried_mass_[u] += q_at_[v];
    alive_[v] = false;
    for (int64_t c : children_[u])
      if (alive_[c]) at_parent_[c] = Row(u)[token_[c]] * scale_[u];
    RecomputeSubtree(u);
  }

  const int64_t n_, vocab_;
  const bool masked_;
  const float* p_;
  const float* q_;
  std::vector<int64_t> parent_;
  std::vector<std::vector<int64_t>> children_;
  std::vector<int64_t> token_;
  std::vector<bool> alive_, own_row_;
  std::vector<float> alpha_, scale_, at_parent_, q_at_, tried_mass_;
  std::vector<float> residual_;
};

// The device form: a chain is a tree; at temperature 0 traversal is greedy
// matching (α is 1 along the argmax path and 0 off it).
class TraversalOnDevice final : public verifiers::SampledTreeRule {
 public:
  TraversalOnDevice()
      : SampledTreeRule(kName, {DraftSampling::kIndependent, DraftSampling::kWithoutReplacement},
                        /*uniforms_per_node=*/1) {}

 private:
  at::Tensor Walk(const DeviceTreeProblem& problem, const at::Tensor& parents, const at::Tensor& tokens,
                  const at::Tensor& q, const at::Tensor& uniforms, const at::Tensor& noise) const override {
    return TraversalWalk(parents, tokens, problem.target_probs, q,
                         problem.sampling == DraftSampling::kWithoutReplacement, uniforms, noise);
  }
};

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = kName,
     .description = "traversal verification on the device, one block a step (§1.10)",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       return std::make_unique<TraversalOnDevice>();
     }});

}  // namespace

at::Tensor TraversalWalk(const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& p,
                         const at::Tensor& q, bool masked, const at::Tensor& uniforms, const at::Tensor& noise) {
  const int64_t n = verifiers::CheckWalkInputs("TraversalWalk", parents, tokens, p, q, uniforms, 1, noise);
#ifdef SPECLAB_WITH_CUDA
  if (kernel_launch::FloatRows(p) && kernel_launch::FloatRows(q) && kernel_launch::FloatVector(uniforms) &&
      kernel_launch::FloatVector(noise) && n <= traversal_kernels::kMaxNodes) {
    const c10::cuda::CUDAGuard guard(p.device());
    const at::Tensor up = parents.contiguous(), ids = tokens.contiguous();
    at::Tensor residual = at::empty_like(p);
    at::Tensor out = at::empty({n + 1}, parents.options());
    kernel_launch::Check(traversal_kernels::LaunchTraversalWalk(
                             up.data_ptr<int64_t>(), ids.data_ptr<int64_t>(), p.data_ptr<float>(), q.data_ptr<float>(),
                             masked, uniforms.data_ptr<float>(), noise.data_ptr<float>(), residual.data_ptr<float>(),
                             out.data_ptr<int64_t>(), n, p.size(1), kernel_launch::Stream(p)),
                         "TraversalWalk");
    return out;
  }
#endif
  const auto host = [](const at::Tensor& t) { return t.to(at::kCPU).contiguous(); };
  const at::Tensor host_p = host(p), host_q = host(q), u = host(uniforms), e = host(noise);  // HostWalk reads them
  HostWalk walk(host(parents), host(tokens), host_p, host_q, masked);
  return walk.Run(u.data_ptr<float>(), e.data_ptr<float>()).to(parents.device());
}

}  // namespace speclab::traversal
