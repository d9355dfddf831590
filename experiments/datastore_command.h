// `speclab datastore`: builds the datastore of the `retrieval` drafter (REST,
// docs/algorithms.md §4.6) from text or token files.
//
//   speclab datastore --tokenizer models/speclab-target --out results/train.splds data/corpus/train.txt
//   speclab datastore --token-files --vocab-size 8000 --out FILE.splds ids.i32 ...
//
// Text files are read as speclab's corpus is (experiments/corpus_text.h):
// documents ended by "<|endoftext|>" lines, each BOS + ids + EOS. Token files
// (--token-files) are raw little-endian int32 ids, concatenated in order,
// each below --vocab-size. The tokens and their suffix array are written to
// --out (drafters/retrieval/datastore.h).
#ifndef SPECLAB_EXPERIMENTS_DATASTORE_COMMAND_H_
#define SPECLAB_EXPERIMENTS_DATASTORE_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace speclab {

struct DatastoreFlags {
  std::string tokenizer;  // a tokenizer file or model folder (text inputs)
  bool token_files = false;
  int64_t vocab_size = 0;  // token files' vocabulary
  std::string out;
  std::vector<std::string> inputs;
};

absl::StatusOr<DatastoreFlags> ParseDatastoreFlags(const std::vector<std::string>& args);

absl::Status RunDatastore(const DatastoreFlags& flags);

}  // namespace speclab

#endif  // SPECLAB_EXPERIMENTS_DATASTORE_COMMAND_H_
