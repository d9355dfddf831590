// Checks a verifier runs on its VerificationProblem before trusting it.
//
// A verifier is only exact for the draft law it was derived for, so rules that
// read q refuse at Verify() time a problem whose sampling mode they are not
// exact for, instead of silently returning a lossy verdict (§0, "the most
// common correctness bug").
#ifndef SPECLAB_ALGORITHMS_VERIFIERS_COMMON_PROBLEM_CHECKS_H_
#define SPECLAB_ALGORITHMS_VERIFIERS_COMMON_PROBLEM_CHECKS_H_

#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "framework/core/verifier.h"

namespace speclab {
namespace verifiers {

const char* DraftSamplingName(DraftSampling sampling);

// Tree present, tokens in range, target_argmax filled for every node.
absl::Status CheckTreeAndArgmax(const VerificationProblem& problem, const std::string& verifier);

// CheckTreeAndArgmax plus one target row per node.
absl::Status CheckTargetRows(const VerificationProblem& problem, const std::string& verifier);

// One draft row per node, of the target's vocabulary, and a sampling mode in `allowed`.
absl::Status CheckDraftRows(const VerificationProblem& problem, const std::string& verifier,
                            std::initializer_list<DraftSampling> allowed);

absl::Status CheckChain(const VerificationProblem& problem, const std::string& verifier);

// True if two draft rows are the same distribution up to float32 transfer noise.
bool SameDraftRow(absl::Span<const double> a, absl::Span<const double> b);

// The one q row all children of `parent` were drawn from (the first child's
// row). Fails if siblings carry different rows, i.e. they were not drawn from
// a single shared distribution, which rules derived for i.i.d. (or
// without-replacement) siblings need. Rows come from float32 device tensors,
// hence a small tolerance.
absl::StatusOr<absl::Span<const double>> SharedSiblingRow(const VerificationProblem& problem, int parent,
                                                          const std::string& verifier);

}  // namespace verifiers
}  // namespace speclab

#endif  // SPECLAB_ALGORITHMS_VERIFIERS_COMMON_PROBLEM_CHECKS_H_
