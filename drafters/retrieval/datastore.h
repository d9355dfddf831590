// Datastore: the token corpus a retrieval drafter searches, with its suffix
// array, as `speclab datastore` writes it (docs/algorithms.md §4.6).
//
// File (little-endian): the 8 bytes "SPLDS001", uint64 token count n, uint32
// the vocabulary size of the ids, int32 tokens[n], int64 suffix_array[n].
#ifndef SPECLAB_DRAFTERS_RETRIEVAL_DATASTORE_H_
#define SPECLAB_DRAFTERS_RETRIEVAL_DATASTORE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace speclab::retrieval {

struct Datastore {
  std::vector<int32_t> tokens;
  std::vector<int64_t> suffixes;  // BuildSuffixArray(tokens)
  uint32_t vocab_size = 0;        // every token is below it

  // Indexes `tokens`; every token must lie in [0, vocab_size).
  static absl::StatusOr<Datastore> Build(std::vector<int32_t> tokens, uint32_t vocab_size);
};

absl::Status WriteDatastore(const Datastore& store, const std::string& path);

// Reads and checks a file WriteDatastore wrote: its header, its length (a
// truncated file is refused), every token against the vocabulary size and
// the suffix array against the tokens (a permutation in suffix order).
// Errors name the file.
absl::StatusOr<Datastore> ReadDatastore(const std::string& path);

}  // namespace speclab::retrieval

#endif  // SPECLAB_DRAFTERS_RETRIEVAL_DATASTORE_H_
