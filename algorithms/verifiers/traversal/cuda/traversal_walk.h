// Traversal verification of a whole tree on CUDA (../traversal_device.h).
// Torch-free: device pointers to contiguous data, `stream` a cudaStream_t;
// asynchronous, never synchronising; returns a cudaError_t.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_TRAVERSAL_CUDA_TRAVERSAL_WALK_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_TRAVERSAL_CUDA_TRAVERSAL_WALK_H_

#include <cstdint>

namespace speclab {
namespace traversal_kernels {

// Trees of up to this many nodes (the walk's state sits in shared memory).
constexpr int64_t kMaxNodes = 256;

// One block runs the whole traversal (../traversal_device.h): parents,
// tokens [n] int64 (children follow their parent); p, q [n, vocab] float32
// (q's row c: the law child c was drawn from; siblings share it); `masked`:
// siblings were drawn without replacement; uniforms [n] (the i-th accept
// test), noise [vocab] Exp(1); residual [n, vocab] scratch. out [n + 1]
// int64: DeviceVerifier::VerifyTree's answer. 1 <= n <= kMaxNodes.
int LaunchTraversalWalk(const int64_t* parents, const int64_t* tokens, const float* p, const float* q, bool masked,
                        const float* uniforms, const float* noise, float* residual, int64_t* out, int64_t n,
                        int64_t vocab, void* stream);

}  // namespace traversal_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_TRAVERSAL_CUDA_TRAVERSAL_WALK_H_
