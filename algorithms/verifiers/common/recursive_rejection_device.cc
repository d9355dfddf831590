#include "algorithms/verifiers/common/recursive_rejection_device.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cfloat>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "algorithms/verifiers/common/chain_on_device.h"
#include "algorithms/verifiers/common/problem_checks.h"
#include "algorithms/verifiers/common/tree_on_device.h"
#include "framework/core/status_macros.h"
#include "framework/device/kernel_launch.h"
#include "framework/sampling.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "algorithms/verifiers/common/cuda/recursive_rejection.h"
#endif

namespace speclab::verifiers {
namespace {

// decision[node], as the kernel's: the accepted child, or where the law of the extra token lies.
constexpr int64_t kStopOnResidual = -1;
constexpr int64_t kStopOnTarget = -2;

// The kernel's arithmetic on the host, in float32 and in the same order per
// entry (sums aside), so that both agree but where a sum rounds differently.
at::Tensor WalkOnHost(const at::Tensor& parents_in, const at::Tensor& tokens_in, const at::Tensor& p_in,
                      const at::Tensor& q_in, const at::Tensor& uniforms_in, const at::Tensor& noise_in,
                      SiblingRows rows) {
  const auto host = [](const at::Tensor& t) { return t.to(at::kCPU).contiguous(); };
  const at::Tensor parents_t = host(parents_in), tokens_t = host(tokens_in), p_t = host(p_in), q_t = host(q_in),
                   uniforms_t = host(uniforms_in), noise_t = host(noise_in);
  const int64_t* parents = parents_t.data_ptr<int64_t>();
  const int64_t* tokens = tokens_t.data_ptr<int64_t>();
  const float* p = p_t.data_ptr<float>();
  const float* q = q_t.data_ptr<float>();
  const float* uniforms = uniforms_t.data_ptr<float>();
  const float* noise = noise_t.data_ptr<float>();
  const int64_t n = parents_t.size(0), vocab = p_t.size(1);
  const bool masked = rows == SiblingRows::kSharedWithoutReplacement;
  std::vector<float> residual(static_cast<size_t>(n * vocab));
  std::vector<int64_t> decision(n, kStopOnTarget);
  for (int64_t node = 0; node < n; ++node) {
    float* r = residual.data() + node * vocab;
    const float* src = p + node * vocab;
    float scale = 1.0f, tried_mass = 0.0f;
    std::vector<int64_t> earlier;
    const float* shared_q = nullptr;
    const auto among = [&](int64_t token) { return std::find(earlier.begin(), earlier.end(), token) != earlier.end(); };
    for (int64_t c = node + 1; c < n; ++c) {
      if (parents[c] != node) continue;
      const float* qc = rows != SiblingRows::kOwn && shared_q != nullptr ? shared_q : q + c * vocab;
      shared_q = qc;
      const int64_t x = tokens[c];
      const float keep = 1.0f - tried_mass;
      const float inv_norm = !masked ? 1.0f : keep > 0.0f ? 1.0f / keep : 0.0f;
      const float qx = masked && among(x) ? 0.0f : qc[x] * inv_norm;
      const float px = src[x] * scale;
      if (qx > 0.0f && px > 0.0f && uniforms[c] * qx < px) {
        decision[node] = c;
        break;
      }
      if (inv_norm > 0.0f) {
        float mass = 0.0f;
        std::vector<float> next(vocab);
        for (int64_t v = 0; v < vocab; ++v) {
          const float qv = masked && among(v) ? 0.0f : qc[v] * inv_norm;
          next[v] = std::max(src[v] * scale - qv, 0.0f);
          mass += next[v];
        }
        if (mass > 0.0f) {
          std::copy(next.begin(), next.end(), r);
          src = r;
          scale = 1.0f / mass;
          decision[node] = kStopOnResidual;
        }
      }
      if (masked && !among(x)) {
        tried_mass += qc[x];
        earlier.push_back(x);
      }
    }
  }
  at::Tensor out = at::zeros({n + 1}, at::TensorOptions().dtype(at::kLong));
  int64_t* o = out.data_ptr<int64_t>();
  int64_t node = 0;
  while (decision[node] >= 0) {
    node = decision[node];
    o[++o[0]] = node;
  }
  const float* law = (decision[node] == kStopOnResidual ? residual.data() : p) + node * vocab;
  int64_t best = 0;
  float best_value = -1.0f;
  for (int64_t v = 0; v < vocab; ++v) {
    const float value = law[v] / std::max(noise[v], FLT_MIN);
    if (value > best_value) {
      best_value = value;
      best = v;
    }
  }
  o[n] = best;
  return out.to(parents_in.device());
}

// The drafts a rule trying children against `rows` is exact for.
DraftSampling ExactFor(SiblingRows rows) {
  return rows == SiblingRows::kSharedWithoutReplacement ? DraftSampling::kWithoutReplacement
                                                        : DraftSampling::kIndependent;
}

}  // namespace

at::Tensor RecursiveRejectionWalk(const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& p,
                                  const at::Tensor& q, const at::Tensor& uniforms, const at::Tensor& noise,
                                  SiblingRows rows) {
  const int64_t n = CheckWalkInputs("RecursiveRejectionWalk", parents, tokens, p, q, uniforms, 1, noise);
#ifdef SPECLAB_WITH_CUDA
  namespace kernels = recursive_rejection_kernels;
  if (kernel_launch::FloatRows(p) && kernel_launch::FloatRows(q) && kernel_launch::FloatVector(uniforms) &&
      kernel_launch::FloatVector(noise) && n <= kernels::kMaxTreeItems) {
    const c10::cuda::CUDAGuard guard(p.device());
    const at::Tensor up = parents.contiguous(), ids = tokens.contiguous();
    at::Tensor residual = at::empty_like(p);
    at::Tensor decision = at::empty({n}, parents.options());
    at::Tensor out = at::empty({n + 1}, parents.options());
    const kernels::QRows q_rows = rows == SiblingRows::kOwn      ? kernels::kOwnRow
                                  : rows == SiblingRows::kShared ? kernels::kFirstSiblingRow
                                                                 : kernels::kFirstSiblingRowMasked;
    kernel_launch::Check(kernels::LaunchRecursiveRejection(
                             up.data_ptr<int64_t>(), ids.data_ptr<int64_t>(), p.data_ptr<float>(), q.data_ptr<float>(),
                             uniforms.data_ptr<float>(), noise.data_ptr<float>(), q_rows, residual.data_ptr<float>(),
                             decision.data_ptr<int64_t>(), out.data_ptr<int64_t>(), n, p.size(1),
                             kernel_launch::Stream(p)),
                         "RecursiveRejectionWalk");
    return out;
  }
#endif
  return WalkOnHost(parents, tokens, p, q, uniforms, noise, rows);
}

RecursiveRejectionOnDevice::RecursiveRejectionOnDevice(std::string rule, SiblingRows rows)
    : SampledTreeRule(std::move(rule), {ExactFor(rows)}, /*uniforms_per_node=*/1), rows_(rows) {}

// p one-hot at temperature 0: min(1, p~/q) is 1 on the argmax and 0
// elsewhere, and every residual keeps the argmax: greedy matching
// (SampledTreeRule's).
at::Tensor RecursiveRejectionOnDevice::Walk(const DeviceTreeProblem& problem, const at::Tensor& parents,
                                            const at::Tensor& tokens, const at::Tensor& q, const at::Tensor& uniforms,
                                            const at::Tensor& noise) const {
  return RecursiveRejectionWalk(parents, tokens, problem.target_probs, q, uniforms, noise, rows_);
}

}  // namespace speclab::verifiers
