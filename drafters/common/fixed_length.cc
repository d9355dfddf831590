#include "drafters/common/fixed_length.h"

#include <algorithm>

namespace speclab {

std::vector<int32_t> ToFixedLength(std::vector<int32_t> drafts, int length, int32_t last) {
  drafts.resize(std::min<size_t>(drafts.size(), std::max(length, 0)));
  while (static_cast<int>(drafts.size()) < length) drafts.push_back(drafts.empty() ? last : drafts.back());
  return drafts;
}

}  // namespace speclab
