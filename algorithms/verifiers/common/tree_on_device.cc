#include "algorithms/verifiers/common/tree_on_device.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "framework/device/kernel_launch.h"
#include "framework/error_text.h"

#ifdef SPECLAB_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>

#include "algorithms/verifiers/common/cuda/tree_walk.h"
#endif

namespace speclab::verifiers {

absl::Status CheckDeviceTree(const DeviceTreeProblem& problem, const std::string& rule, bool needs_draft) {
  auto is_nodes = [](const at::Tensor& t) {
    return t.defined() && t.dim() == 1 && t.size(0) >= 1 && t.scalar_type() == at::kLong;
  };
  if (!is_nodes(problem.tokens) || !is_nodes(problem.parents) || problem.parents.size(0) != problem.tokens.size(0))
    return absl::InvalidArgumentError(absl::StrCat(rule, " (device): tokens and parents must be int64 [n >= 1]"));
  const at::Tensor& p = problem.target_probs;
  if (!p.defined() || p.dim() != 2 || p.size(0) != problem.tokens.size(0))
    return absl::InvalidArgumentError(
        absl::StrCat(rule, " (device): target rows must be [", problem.tokens.size(0), ", vocab]"));
  if (!needs_draft) return absl::OkStatus();
  if (!problem.draft_probs.defined())
    return absl::InvalidArgumentError(
        absl::StrCat(rule, " (device): needs the draft rows q the drafts were sampled from"));
  if (problem.draft_probs.sizes() != p.sizes())
    return absl::InvalidArgumentError(absl::StrCat(rule, " (device): draft rows ",
                                                   c10::str(problem.draft_probs.sizes()), " do not match target rows ",
                                                   c10::str(p.sizes())));
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> MatchWalk(const DeviceTreeProblem& problem, const at::Tensor& y) {
  try {
    return TreeWalk(problem.parents.to(y.device()), problem.tokens.to(y.device()), y);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("tree walk on the device: ", ErrorText(e)));
  }
}

DeviceTreeProblem ChainAsTree(const DeviceChainProblem& problem, DraftSampling sampling) {
  const int64_t n = problem.tokens.dim() == 1 ? problem.tokens.size(0) : 0;
  return {.tokens = problem.tokens, .parents = at::arange(-1, n - 1, problem.tokens.options()),
          .target_probs = problem.target_probs, .draft_probs = problem.draft_probs, .sampling = sampling,
          .greedy = problem.greedy};
}

at::Tensor ChainAnswerOfWalk(const at::Tensor& walk) {
  return at::cat({walk.narrow(0, 0, 1), walk.narrow(0, walk.size(0) - 1, 1)});
}

at::Tensor PathAnswer(const at::Tensor& mask, const at::Tensor& best, const at::Tensor& extra) {
  const int64_t n = mask.size(0);
  // best's ancestors below the root, root-down: their indices ascend.
  const at::Tensor index = at::arange(n, best.options());
  const at::Tensor on_path = mask.index_select(0, best).squeeze(0).logical_and(index.gt(0));
  const at::Tensor count = on_path.sum().view({1});
  const at::Tensor first = std::get<0>(at::where(on_path, index, index + n).sort()).narrow(0, 0, n - 1);
  const at::Tensor path = at::where(index.narrow(0, 0, n - 1).lt(count), first, at::zeros_like(first));
  return at::cat({count, path, extra.view({1})});
}

at::Tensor TreeWalk(const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& y) {
  const int64_t n = parents.dim() == 1 ? parents.size(0) : 0;
  for (const at::Tensor* t : {&parents, &tokens, &y})
    TORCH_CHECK(t->dim() == 1 && t->size(0) == n && n >= 1 && t->scalar_type() == at::kLong &&
                    t->device() == parents.device(),
                "TreeWalk: parents, tokens and y must be int64 [n >= 1] on one device, got ", t->sizes());
#ifdef SPECLAB_WITH_CUDA
  if (parents.is_cuda() && n <= tree_walk_kernels::kMaxTreeItems) {
    const c10::cuda::CUDAGuard guard(parents.device());
    const at::Tensor up = parents.contiguous(), ids = tokens.contiguous(), ys = y.contiguous();
    at::Tensor out = at::empty({n + 1}, parents.options());
    kernel_launch::Check(tree_walk_kernels::LaunchTreeWalk(up.data_ptr<int64_t>(), ids.data_ptr<int64_t>(), ys.data_ptr<int64_t>(),
                                             out.data_ptr<int64_t>(), n, kernel_launch::Stream(up)),
                "TreeWalk");
    return out;
  }
#endif
  const at::Tensor host = at::stack({parents, tokens, y}).to(at::kCPU).contiguous();
  const int64_t* up = host.data_ptr<int64_t>();
  const int64_t* ids = up + n;
  const int64_t* ys = up + 2 * n;
  at::Tensor out = at::zeros({n + 1}, at::TensorOptions().dtype(at::kLong));
  int64_t* o = out.data_ptr<int64_t>();
  int64_t node = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (up[i] == node && ids[i] == ys[node]) {  // children follow their parent in index order
      o[++o[0]] = i;
      node = i;
    }
  }
  o[n] = ys[node];
  return out.to(parents.device());
}

int64_t CheckWalkInputs(const char* walk, const at::Tensor& parents, const at::Tensor& tokens, const at::Tensor& p,
                        const at::Tensor& q, const at::Tensor& uniforms, int64_t uniforms_per_node,
                        const at::Tensor& noise) {
  const int64_t n = parents.dim() == 1 ? parents.size(0) : 0;
  TORCH_CHECK(n >= 1 && tokens.sizes() == parents.sizes() && parents.scalar_type() == at::kLong &&
                  tokens.scalar_type() == at::kLong,
              walk, ": parents and tokens must be int64 [n >= 1]");
  TORCH_CHECK(p.dim() == 2 && p.size(0) == n && q.sizes() == p.sizes() && p.scalar_type() == at::kFloat &&
                  q.scalar_type() == at::kFloat,
              walk, ": p and q must be float32 [", n, ", vocab], got ", p.sizes(), " and ", q.sizes());
  TORCH_CHECK(uniforms.dim() == 1 && uniforms.size(0) == uniforms_per_node * n && noise.dim() == 1 &&
                  noise.size(0) == p.size(1) && uniforms.scalar_type() == at::kFloat &&
                  noise.scalar_type() == at::kFloat,
              walk, ": uniforms must be float32 [", uniforms_per_node * n, "] and noise [", p.size(1), "]");
  for (const at::Tensor* t : {&tokens, &p, &q, &uniforms, &noise})
    TORCH_CHECK(t->device() == parents.device(), walk, ": every input on one device");
  return n;
}

}  // namespace speclab::verifiers
