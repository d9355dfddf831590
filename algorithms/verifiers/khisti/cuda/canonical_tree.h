// Khisti et al.'s canonical two-step verification over a whole tree, on CUDA
// (../khisti_device.h). Torch-free: device pointers to contiguous data,
// `stream` a cudaStream_t; asynchronous, never synchronising; returns a
// cudaError_t.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_CUDA_CANONICAL_TREE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_CUDA_CANONICAL_TREE_H_

#include <cstdint>

namespace speclab {
namespace canonical_kernels {

constexpr int64_t kMaxNodes = 256;
// A node with K >= 2 drafts holds its q row's support in shared memory, and
// its drafts' tuples in registers: these bound what it can verify exactly.
constexpr int64_t kMaxSupport = 2048;
constexpr int kMaxDrafts = 32;

// Every node decides among its children at once: first its law r on q's
// support, one block of 256 threads a support token (a node's K-tuples
// spread over many SMs), then one block a node: the selection, the test,
// and the token it emits if the walk stops there; then one thread walks the
// decisions from the root.
// parents, tokens [n] int64 (children follow their parent); p, q [n, vocab]
// float32 (q's row c the law child c was drawn from; siblings share the
// first one's); uniforms [2 n] (node u's selection, then its test), noise
// [vocab] Exp(1); laws [n, kMaxSupport] float32, decision, extra [n] int64
// scratch. out [n + 1] int64:
// DeviceVerifier::VerifyTree's answer. 1 <= n <= kMaxNodes.
int LaunchCanonicalTree(const int64_t* parents, const int64_t* tokens, const float* p, const float* q,
                        const float* uniforms, const float* noise, double max_selection_tuples, float* laws,
                        int64_t* decision, int64_t* extra, int64_t* out, int64_t n, int64_t vocab, void* stream);

}  // namespace canonical_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_KHISTI_CUDA_CANONICAL_TREE_H_
