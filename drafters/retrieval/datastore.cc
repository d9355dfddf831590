#include "drafters/retrieval/datastore.h"

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "drafters/retrieval/suffix_array.h"

namespace speclab::retrieval {
namespace {

constexpr char kMagic[8] = {'S', 'P', 'L', 'D', 'S', '0', '0', '1'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + sizeof(uint64_t) + sizeof(uint32_t);

absl::Status CheckTokens(const std::vector<int32_t>& tokens, uint32_t vocab_size, const std::string& where) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<uint32_t>(tokens[i]) >= vocab_size)
      return absl::InvalidArgumentError(absl::StrCat(where, ": token ", i, " is ", tokens[i],
                                                     ", outside the vocabulary [0, ", vocab_size, ")"));
  }
  return absl::OkStatus();
}

// The suffix array is a permutation and each neighbour pair is in order (its
// first token, then the ranks of the rest, which the next entries give).
absl::Status CheckSuffixes(const Datastore& store, const std::string& where) {
  const int64_t n = static_cast<int64_t>(store.tokens.size());
  std::vector<int64_t> rank(n, -1);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t s = store.suffixes[j];
    if (s < 0 || s >= n || rank[s] >= 0)
      return absl::DataLossError(absl::StrCat(where, ": the suffix array is not a permutation (entry ", j, ")"));
    rank[s] = j;
  }
  for (int64_t j = 1; j < n; ++j) {
    const int64_t a = store.suffixes[j - 1], b = store.suffixes[j];
    const bool ordered = store.tokens[a] < store.tokens[b] ||
                         (store.tokens[a] == store.tokens[b] &&
                          (a + 1 == n || (b + 1 < n && rank[a + 1] < rank[b + 1])));
    if (!ordered)
      return absl::DataLossError(absl::StrCat(where, ": the suffix array is out of order at entry ", j));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Datastore> Datastore::Build(std::vector<int32_t> tokens, uint32_t vocab_size) {
  if (absl::Status ok = CheckTokens(tokens, vocab_size, "datastore"); !ok.ok()) return ok;
  Datastore store;
  store.suffixes = BuildSuffixArray(tokens);
  store.tokens = std::move(tokens);
  store.vocab_size = vocab_size;
  return store;
}

absl::Status WriteDatastore(const Datastore& store, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  const uint64_t n = store.tokens.size();
  out.write(kMagic, sizeof(kMagic));
  out.write(reinterpret_cast<const char*>(&n), sizeof(n));
  out.write(reinterpret_cast<const char*>(&store.vocab_size), sizeof(store.vocab_size));
  out.write(reinterpret_cast<const char*>(store.tokens.data()), static_cast<std::streamsize>(n * sizeof(int32_t)));
  out.write(reinterpret_cast<const char*>(store.suffixes.data()), static_cast<std::streamsize>(n * sizeof(int64_t)));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat(path, ": write failed (disk full?)"));
  return absl::OkStatus();
}

absl::StatusOr<Datastore> ReadDatastore(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": no such datastore (build one with `speclab datastore`)"));
  const uint64_t bytes = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  char magic[sizeof(kMagic)] = {};
  uint64_t n = 0;
  Datastore store;
  if (bytes < kHeaderBytes || !in.read(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0)
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a speclab datastore (expected the header SPLDS001)"));
  in.read(reinterpret_cast<char*>(&n), sizeof(n));
  in.read(reinterpret_cast<char*>(&store.vocab_size), sizeof(store.vocab_size));
  const uint64_t expected = kHeaderBytes + n * (sizeof(int32_t) + sizeof(int64_t));
  if (n == 0 || n > (uint64_t{1} << 40) || bytes != expected)
    return absl::DataLossError(absl::StrCat(path, ": ", bytes, " bytes, but its header promises ", n,
                                            " tokens (", expected, " bytes): truncated or corrupt"));
  store.tokens.resize(n);
  store.suffixes.resize(n);
  in.read(reinterpret_cast<char*>(store.tokens.data()), static_cast<std::streamsize>(n * sizeof(int32_t)));
  in.read(reinterpret_cast<char*>(store.suffixes.data()), static_cast<std::streamsize>(n * sizeof(int64_t)));
  if (!in) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  if (absl::Status ok = CheckTokens(store.tokens, store.vocab_size, path); !ok.ok()) return ok;
  if (absl::Status ok = CheckSuffixes(store, path); !ok.ok()) return ok;
  return store;
}

}  // namespace speclab::retrieval
