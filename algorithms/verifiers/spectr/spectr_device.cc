#include "algorithms/verifiers/spectr/spectr_device.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
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

#include "algorithms/verifiers/spectr/cuda/k_seq_tree.h"
#endif

namespace speclab::spectr {
namespace {

constexpr char kName[] = "spectr";
constexpr int kGrid = 16;    // as the kernel's k_seq_kernels::kGrid
constexpr int kPasses = 8;   // and kPasses

double Violation(float beta, int k, double rho) {
  return 1.0 - std::pow(1.0 - static_cast<double>(beta), k) - rho * static_cast<double>(beta);
}

// The kernel's ρ search (k_seq_tree.cu), in its arithmetic.
float KSeqRho(const float* p, const float* q, int k, int64_t vocab) {
  if (k <= 1) return 1.0f;
  double lo = 1.0, hi = static_cast<double>(k);
  for (int pass = 0; pass < kPasses; ++pass) {
    int valid = -1;
    for (int j = 0; j < kGrid && valid < 0; ++j) {
      const double rho = lo + (hi - lo) * j / kGrid;
      const float inv = 1.0f / static_cast<float>(rho);
      float beta = 0.0f;
      for (int64_t x = 0; x < vocab; ++x)
        if (q[x] > 0.0f) beta += std::min(q[x], p[x] * inv);
      if (Violation(beta, k, rho) <= 0.0) valid = j;
    }
    if (valid < 0) {
      lo = lo + (hi - lo) * (kGrid - 1) / kGrid;
      continue;
    }
    const double next_hi = lo + (hi - lo) * valid / kGrid;
    if (valid == 0) return static_cast<float>(next_hi);
    lo = lo + (hi - lo) * (valid - 1) / kGrid;
    hi = next_hi;
  }
  return static_cast<float>(hi);
}

// The first index of the largest law[x] / max(noise[x], FLT_MIN).
int64_t Race(const std::vector<float>& law, const float* noise) {
  int64_t best = 0;
  float best_value = -1.0f;
  for (size_t x = 0; x < law.size(); ++x) {
    const float value = law[x] / std::max(noise[x], FLT_MIN);
    if (value > best_value) {
      best_value = value;
      best = static_cast<int64_t>(x);
    }
  }
  return best;
}

// The kernels' walk on the host, in float32 and in their order (sums aside).
at::Tensor WalkOnHost(const at::Tensor& parents_in, const at::Tensor& tokens_in, const at::Tensor& p_in,
                      const at::Tensor& q_in, const at::Tensor& uniforms_in, const at::Tensor& noise_in) {
  const auto host = [](const at::Tensor& t) { return t.to(at::kCPU).contiguous(); };
  const at::Tensor parents_t = host(parents_in), tokens_t = host(tokens_in), p_t = host(p_in), q_t = host(q_in),
                   uniforms_t = host(uniforms_in), noise_t = host(noise_in);
  const int64_t* parents = parents_t.data_ptr<int64_t>();
  const int64_t* tokens = tokens_t.data_ptr<int64_t>();
  const float* uniforms = uniforms_t.data_ptr<float>();
  const float* noise = noise_t.data_ptr<float>();
  const int64_t n = parents_t.size(0), vocab = p_t.size(1);
  // Groups: the first node with each path of tokens (parents come first).
  std::vector<int64_t> rep(n, 0), depth(n, 0);
  for (int64_t c = 1; c < n; ++c) {
    depth[c] = depth[parents[c]] + 1;
    rep[c] = c;
    for (int64_t e = 1; e < c; ++e) {
      if (depth[e] == depth[c] && rep[parents[e]] == rep[parents[c]] && tokens[e] == tokens[c]) {
        rep[c] = e;
        break;
      }
    }
  }
  const auto decide = [&](int64_t u, int64_t& extra) -> int64_t {
    std::vector<int64_t> candidates;
    for (int64_t c = u + 1; c < n; ++c)
      if (rep[parents[c]] == u) candidates.push_back(c);
    const int k = static_cast<int>(candidates.size());
    const float* pu = p_t.data_ptr<float>() + u * vocab;
    const float* qs = q_t.data_ptr<float>() + (k > 0 ? candidates[0] : 0) * vocab;
    const float rho = KSeqRho(pu, qs, k, vocab);
    for (int64_t c : candidates) {
      const float px = pu[tokens[c]], qx = qs[tokens[c]];
      if (qx > 0.0f && px > 0.0f && uniforms[c] * (rho * qx) < px) return c;
    }
    const float inv = 1.0f / rho;
    float beta = 0.0f;
    if (k > 0)
      for (int64_t x = 0; x < vocab; ++x) beta += std::min(qs[x], pu[x] * inv);
    const float scale = beta > 0.0f ? static_cast<float>((1.0 - std::pow(1.0 - static_cast<double>(beta), k)) / beta)
                                    : 0.0f;
    std::vector<float> residual(vocab);
    float mass = 0.0f;
    for (int64_t x = 0; x < vocab; ++x) {
      residual[x] = std::max(pu[x] - std::min(qs[x], pu[x] * inv) * scale, 0.0f);
      mass += residual[x];
    }
    extra = beta > 0.0f && mass > 0.0f ? Race(residual, noise) : Race(std::vector<float>(pu, pu + vocab), noise);
    return -1;
  };
  int64_t node = 0, extra = 0;
  for (int64_t chosen; (chosen = decide(rep[node], extra)) >= 0;) node = chosen;
  at::Tensor out = at::zeros({n + 1}, at::TensorOptions().dtype(at::kLong));
  int64_t* o = out.data_ptr<int64_t>();
  o[0] = depth[node];
  for (int64_t i = depth[node], w = node; i >= 1; --i, w = parents[w]) o[i] = w;
  o[n] = extra;
  return out.to(parents_in.device());
}

// The device form: a chain is a tree (one candidate a depth: k = 1 and
// ρ = 1, chain rejection sampling).
class SpecTrOnDevice final : public verifiers::SampledTreeRule {
 public:
  SpecTrOnDevice() : SampledTreeRule(kName, {DraftSampling::kIndependent}, /*uniforms_per_node=*/1) {}
  bool verifies_prefixes_alone() const override { return true; }  // a chain from the root down

 private:
  at::Tensor Walk(const DeviceTreeProblem& problem, const at::Tensor& parents, const at::Tensor& tokens,
                  const at::Tensor& q, const at::Tensor& uniforms, const at::Tensor& noise) const override {
    return KSeqTreeWalk(parents, tokens, problem.target_probs, q, uniforms, noise);
  }
};

const bool kRegistered = DeviceVerifierRegistry::Add(
    {.name = kName,
     .description = "SpecTr K-SEQ on the device, one block a group of same-prefix nodes (§1.7)",
     .lossless = "lossless",
     .create = [](Options&) -> absl::StatusOr<std::unique_ptr<DeviceVerifier>> {
       return std::make_unique<SpecTrOnDevice>();
     }});

}  // namespace

at::Tensor KSeqTreeWalk(const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& p, const at::Tensor& q,
                        const at::Tensor& uniforms, const at::Tensor& noise) {
  const int64_t n = verifiers::CheckWalkInputs("KSeqTreeWalk", parents, tokens, p, q, uniforms, 1, noise);
#ifdef SPECLAB_WITH_CUDA
  namespace kernels = k_seq_kernels;
  if (kernel_launch::FloatRows(p) && kernel_launch::FloatRows(q) && kernel_launch::FloatVector(uniforms) &&
      kernel_launch::FloatVector(noise) && n <= kernels::kMaxNodes) {
    const c10::cuda::CUDAGuard guard(p.device());
    const at::Tensor up = parents.contiguous(), ids = tokens.contiguous();
    at::Tensor scratch = at::empty({2, n}, parents.options());
    at::Tensor out = at::empty({n + 1}, parents.options());
    kernel_launch::Check(kernels::LaunchKSeqTree(up.data_ptr<int64_t>(), ids.data_ptr<int64_t>(), p.data_ptr<float>(),
                                                 q.data_ptr<float>(), uniforms.data_ptr<float>(),
                                                 noise.data_ptr<float>(), scratch[0].data_ptr<int64_t>(),
                                                 scratch[1].data_ptr<int64_t>(), out.data_ptr<int64_t>(), n, p.size(1),
                                                 kernel_launch::Stream(p)),
                         "KSeqTreeWalk");
    return out;
  }
#endif
  return WalkOnHost(parents, tokens, p, q, uniforms, noise);
}

}  // namespace speclab::spectr
