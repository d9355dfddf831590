// A random draft tree with target and draft rows and the random numbers of a
// tree rule's walk, for tests that compare a rule's CUDA kernels with their
// host twin (recursive rejection, traversal).
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_TESTING_RANDOM_TREE_ROWS_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_TESTING_RANDOM_TREE_ROWS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace speclab::enumeration {

struct RandomTreeRows {
  at::Tensor parents, tokens;  // [n] int64: parents before children; tokens among the first 5 of the vocabulary
  at::Tensor p, q;             // [n, vocab] float32 rows, peaked (uniform^4, normalised)
  at::Tensor uniforms;         // [n] float32 U[0, 1)
  at::Tensor noise;            // [vocab] float32 Exp(1)

  RandomTreeRows Cuda() const;  // the same tensors on the CUDA device
};

// On the CPU, from a generator seeded with `seed`.
RandomTreeRows MakeRandomTreeRows(int64_t n, int64_t vocab, uint64_t seed);

}  // namespace speclab::enumeration

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_TESTING_RANDOM_TREE_ROWS_H_
