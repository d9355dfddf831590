// Recursive rejection over a whole tree, on CUDA (specinfer's, rrs' and
// rrs_wor's device forms: ../recursive_rejection_device.h). Torch-free, as
// tree_walk.h: device pointers to contiguous data, `stream` a cudaStream_t;
// asynchronous, never synchronising; returns a cudaError_t.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CUDA_RECURSIVE_REJECTION_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CUDA_RECURSIVE_REJECTION_H_

#include <cstdint>

#include "framework/model/cuda/tree_kernels.h"

namespace speclab {
namespace recursive_rejection_kernels {

using tree_kernels::kMaxTreeItems;

// Which q a child is tried against.
enum QRows : int {
  kOwnRow = 0,          // its own row (SpecInfer)
  kFirstSiblingRow = 1,  // the row of its parent's first child, shared by i.i.d. siblings (RRS)
  // That row with the earlier siblings' tokens removed and renormalised:
  // siblings drawn in order without replacement (RRS without replacement).
  kFirstSiblingRowMasked = 2,
};

// Every node decides among its children at once (one block a node; off the
// walk a decision is simply never read), then one block walks the decisions
// from the root and races the stopping node's residual with `noise`.
// parents, tokens [n] int64 (children follow their parent); p, q [n, vocab]
// float32, q's row c the law child c was drawn from; `rows` says which row
// child c is tried against (QRows); uniforms [n] (child c's test:
// uniforms[c] q_c(x) < p~(x)); noise [vocab] Exp(1). residual [n, vocab] and
// decision [n] int64 are scratch. out [n + 1] int64: the tree walk's answer
// (DeviceVerifier::VerifyTree). 1 <= n <= kMaxTreeItems.
int LaunchRecursiveRejection(const int64_t* parents, const int64_t* tokens, const float* p, const float* q,
                             const float* uniforms, const float* noise, QRows rows, float* residual,
                             int64_t* decision, int64_t* out, int64_t n, int64_t vocab, void* stream);

}  // namespace recursive_rejection_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_CUDA_RECURSIVE_REJECTION_H_
