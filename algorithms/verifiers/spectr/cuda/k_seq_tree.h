// SpecTr's K-SEQ over a whole tree, on CUDA (../spectr_device.h).
// Torch-free: device pointers to contiguous data, `stream` a cudaStream_t;
// asynchronous, never synchronising; returns a cudaError_t.
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_SPECTR_CUDA_K_SEQ_TREE_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_SPECTR_CUDA_K_SEQ_TREE_H_

#include <cstdint>

namespace speclab {
namespace k_seq_kernels {

// Trees of up to this many nodes (each block groups them in shared memory).
constexpr int64_t kMaxNodes = 256;

// ρ's search: each pass evaluates β at kGrid points of the bracket and keeps
// the sub-interval where the validity test changes sign; after kPasses the
// bracket is (k - 1) 16^-8 < 2.4e-10 (k - 1) wide, below float32's resolution.
constexpr int kGrid = 16;
constexpr int kPasses = 8;

// Every group of same-prefix nodes decides at once (one block a group: ρ,
// its candidates' tests, and the token it emits if it stops there), then one
// block walks the decisions from the root. parents, tokens [n] int64
// (children follow their parent); p, q [n, vocab] float32 (the candidates'
// shared q: the first candidate's row); uniforms [n] (candidate c's test),
// noise [vocab] Exp(1); decision [n] int64 and extra [n] int64 are scratch.
// out [n + 1] int64: DeviceVerifier::VerifyTree's answer. 1 <= n <= kMaxNodes.
int LaunchKSeqTree(const int64_t* parents, const int64_t* tokens, const float* p, const float* q,
                   const float* uniforms, const float* noise, int64_t* decision, int64_t* extra, int64_t* out,
                   int64_t n, int64_t vocab, void* stream);

}  // namespace k_seq_kernels
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_SPECTR_CUDA_K_SEQ_TREE_H_
