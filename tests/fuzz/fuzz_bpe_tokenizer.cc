// libFuzzer target: a HuggingFace tokenizer.json (framework/tokenizers/bpe_tokenizer.h).
// The input's first line is text to encode; the rest is the tokenizer.json.
// A tokenizer that loads must encode and decode without crashing, and emit
// ids inside its vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "framework/tokenizers/bpe_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  if (newline == std::string_view::npos) return 0;
  auto tokenizer = speclab::BpeTokenizer::FromJson(input.substr(newline + 1), "tokenizer.json");
  if (!tokenizer.ok()) return 0;
  auto ids = (*tokenizer)->Encode(input.substr(0, newline));
  if (!ids.ok()) return 0;
  for (int32_t id : *ids)
    if (id < 0 || id >= (*tokenizer)->vocab_size()) std::abort();
  (void)(*tokenizer)->Decode(*ids);
  return 0;
}
