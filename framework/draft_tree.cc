#include "framework/draft_tree.h"

#include <ATen/ATen.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "framework/error_text.h"

namespace speclab {

int64_t DraftSize(const DraftTree& draft) {
  return draft.device_shape ? draft.tokens.size(0) : static_cast<int64_t>(draft.tree.size());
}

absl::Status AdoptShape(DraftTree& draft, absl::Span<const int64_t> parents, absl::Span<const int32_t> tokens) {
  if (parents.empty() || parents.size() != tokens.size() || parents[0] != -1)
    return absl::InternalError(absl::StrCat("a device-shaped draft of ", tokens.size(), " tokens came back with ",
                                            parents.size(), " parents (the root's must be -1)"));
  TokenTree tree(tokens[0]);
  for (size_t i = 1; i < parents.size(); ++i) {
    if (parents[i] < 0 || parents[i] >= static_cast<int64_t>(i))
      return absl::InternalError(absl::StrCat("device-shaped draft: node ", i, " has parent ", parents[i],
                                              ", not an earlier node"));
    tree.AddNode(static_cast<int>(parents[i]), tokens[i]);
  }
  draft.tree = std::move(tree);
  draft.device_shape.reset();
  return absl::OkStatus();
}

absl::Status ReadShape(DraftTree& draft) {
  if (!draft.device_shape) return absl::OkStatus();
  try {
    const at::Tensor host = at::cat({draft.device_shape->parents.to(at::kLong), draft.tokens.to(at::kLong)})
                                .to(at::kCPU)
                                .contiguous();
    const int64_t n = draft.tokens.size(0);
    const int64_t* data = host.data_ptr<int64_t>();
    const std::vector<int32_t> tokens(data + n, data + 2 * n);
    return AdoptShape(draft, absl::MakeConstSpan(data, n), tokens);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("ReadShape: ", ErrorText(e)));
  }
}

}  // namespace speclab
