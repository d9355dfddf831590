#include "experiments/datastore_command.h"

#include <chrono>
#include <cstdio>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "drafters/retrieval/datastore.h"
#include "experiments/corpus_text.h"
#include "framework/core/status_macros.h"
#include "framework/tokenizers/tokenizer.h"

namespace speclab {
namespace {

// Raw little-endian int32 ids, appended to `ids`.
absl::Status ReadTokenFile(const std::string& path, std::vector<int32_t>& ids) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the token file"));
  const int64_t bytes = static_cast<int64_t>(in.tellg());
  if (bytes % 4 != 0)
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", bytes, " bytes is not a whole number of int32 ids"));
  in.seekg(0);
  const size_t before = ids.size();
  ids.resize(before + bytes / 4);
  if (!in.read(reinterpret_cast<char*>(ids.data() + before), bytes))
    return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DatastoreFlags> ParseDatastoreFlags(const std::vector<std::string>& args) {
  DatastoreFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--tokenizer" && has_value) {
      flags.tokenizer = args[++i];
    } else if (a == "--out" && has_value) {
      flags.out = args[++i];
    } else if (a == "--vocab-size" && has_value) {
      if (!absl::SimpleAtoi(args[++i], &flags.vocab_size) || flags.vocab_size < 1 || flags.vocab_size > (1LL << 31))
        return absl::InvalidArgumentError(absl::StrCat("--vocab-size: expected an integer in [1, 2^31], got '",
                                                       args[i], "'"));
    } else if (a == "--token-files") {
      flags.token_files = true;
    } else if (absl::StartsWith(a, "--")) {
      return absl::InvalidArgumentError(absl::StrCat("datastore: unexpected argument '", a, "'"));
    } else {
      flags.inputs.push_back(a);
    }
  }
  if (flags.out.empty()) return absl::InvalidArgumentError("datastore needs --out FILE");
  if (flags.inputs.empty()) return absl::InvalidArgumentError("datastore needs at least one input file");
  if (flags.token_files != (flags.vocab_size > 0))
    return absl::InvalidArgumentError("datastore: --token-files and --vocab-size go together");
  if (flags.token_files == !flags.tokenizer.empty())
    return absl::InvalidArgumentError("datastore: give --tokenizer for text files, or --token-files for ids");
  return flags;
}

absl::Status RunDatastore(const DatastoreFlags& flags) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> ids;
  uint32_t vocab_size = static_cast<uint32_t>(flags.vocab_size);
  if (flags.token_files) {
    for (const std::string& input : flags.inputs) RETURN_IF_ERROR(ReadTokenFile(input, ids));
  } else {
    ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, LoadTokenizer(flags.tokenizer));
    vocab_size = static_cast<uint32_t>(tokenizer->vocab_size());
    int64_t documents = 0;
    for (const std::string& input : flags.inputs) {
      ASSIGN_OR_RETURN(CorpusIds corpus, TokenizeCorpusText(*tokenizer, input));
      ids.insert(ids.end(), corpus.ids.begin(), corpus.ids.end());
      documents += corpus.documents;
    }
    std::printf("speclab: %lld documents, %zu ids\n", static_cast<long long>(documents), ids.size());
  }
  if (ids.empty()) return absl::InvalidArgumentError("datastore: the inputs hold no tokens");
  const size_t n = ids.size();
  auto store = retrieval::Datastore::Build(std::move(ids), vocab_size);
  if (!store.ok()) return store.status();
  RETURN_IF_ERROR(retrieval::WriteDatastore(*store, flags.out));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("speclab: %zu tokens indexed (vocabulary %u) in %.1f s; wrote %s\n", n, vocab_size, seconds,
              flags.out.c_str());
  return absl::OkStatus();
}

}  // namespace speclab
