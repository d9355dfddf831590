// libFuzzer target: a SentencePiece .model file (framework/tokenizers/sentencepiece_tokenizer.h).
// A model that loads must encode a fixed text and decode it without crashing,
// emitting ids inside its vocabulary.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "framework/tokenizers/sentencepiece_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/speclab_fuzz_spm_" + std::to_string(::getpid()) + ".model";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto tokenizer = speclab::SentencePieceTokenizer::Load(path);
  if (!tokenizer.ok()) return 0;
  for (const char* text : {"Hello world", "def f(x):\n\treturn x  # \xc3\xa9\xe2\x82\xac", "", "\xff\xfe"}) {
    auto ids = (*tokenizer)->Encode(text);
    if (!ids.ok()) continue;
    for (int32_t id : *ids)
      if (id < 0 || id >= (*tokenizer)->vocab_size()) std::abort();
    (void)(*tokenizer)->Decode(*ids);
  }
  return 0;
}
