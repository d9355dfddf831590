#include "experiments/corpus_windows.h"

#include <ATen/ATen.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "experiments/corpus_text.h"
#include "framework/core/status_macros.h"

namespace speclab {

absl::StatusOr<at::Tensor> CorpusTokens(const Tokenizer& tokenizer, const std::string& path, int64_t seq_len) {
  ASSIGN_OR_RETURN(CorpusIds ids, TokenizeCorpusText(tokenizer, path));
  if (static_cast<int64_t>(ids.ids.size()) <= seq_len)
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", ids.ids.size(), " tokens, fewer than one window of data.seq_len ", seq_len));
  return at::tensor(std::vector<int64_t>(ids.ids.begin(), ids.ids.end()), at::kLong);
}

at::Tensor RandomWindows(const at::Tensor& tokens, int64_t windows, int64_t seq_len, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> start(0, tokens.numel() - seq_len - 1);
  std::vector<at::Tensor> rows;
  for (int64_t w = 0; w < windows; ++w) rows.push_back(tokens.narrow(0, start(rng), seq_len));
  return at::stack(rows);
}

}  // namespace speclab
