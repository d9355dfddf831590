// The fill rule of token-only drafters whose device forms draft a fixed
// number of tokens a step (DeviceDrafter::ContinuationAt): where the lookup
// gives fewer, its last token repeats. Any rule keeps the law (the drafts
// stay a function of the context); this one is shared so that the host's
// reference and the kernels agree on it.
#ifndef SPECLAB_DRAFTERS_COMMON_FIXED_LENGTH_H_
#define SPECLAB_DRAFTERS_COMMON_FIXED_LENGTH_H_

#include <cstdint>
#include <vector>

namespace speclab {

// Exactly `length` tokens: `drafts` cut at `length`, then its last token
// (`last`, the sequence's last token, where there are none) repeated.
std::vector<int32_t> ToFixedLength(std::vector<int32_t> drafts, int length, int32_t last);

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_COMMON_FIXED_LENGTH_H_
