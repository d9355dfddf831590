// LruNgramTable: Cacheback's cache (docs/algorithms.md §4.10), and lookahead
// decoding's n-gram pool (§4.9). Rows keyed by
// a leader n-gram hold that leader's most recent followers (the next
// follower_length tokens after it); rows and each row's followers are kept
// in least-recently-used order, at most `rows` rows of `columns` followers.
// Learning slides a window of leader + follower tokens over the text as it
// arrives (the last window's tail is kept, so text fed in pieces teaches
// what it teaches fed at once); each window moves its row and its follower
// to the front, evicting the least recent where full.
#ifndef SPECLAB_DRAFTERS_COMMON_LRU_NGRAM_TABLE_H_
#define SPECLAB_DRAFTERS_COMMON_LRU_NGRAM_TABLE_H_

#include <cstdint>
#include <list>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace speclab {

struct NgramTableShape {
  int leader_length = 1;    // tokens in a key
  int follower_length = 2;  // tokens in each follower
  int rows = 256;           // keys kept
  int columns = 4;          // followers kept per key
};

class LruNgramTable {
 public:
  // A key and its followers, most recent first.
  using Row = std::pair<std::vector<int32_t>, std::vector<std::vector<int32_t>>>;

  explicit LruNgramTable(NgramTableShape shape) : shape_(shape) {}
  // A table holding `rows` (most recent first; as Rows() gives them), with
  // no text before the next Learn().
  static LruNgramTable FromRows(NgramTableShape shape, std::vector<Row> rows);

  const NgramTableShape& shape() const { return shape_; }

  // Learns every window that ends in `tokens`, continuing the text fed before.
  void Learn(absl::Span<const int32_t> tokens);
  // Learns one window: `follower` after `leader` (their shape's lengths).
  void Remember(absl::Span<const int32_t> leader, absl::Span<const int32_t> follower);
  // Forgets the text's tail, so that the next Learn() starts a new text (a
  // new prompt); the table itself is kept.
  void EndText() { tail_.clear(); }
  // Takes `text` as the text learned so far (where the table learned it
  // elsewhere): the next Learn() continues it without learning it again.
  void ContinueText(absl::Span<const int32_t> text);

  // The followers of `leader` (leader_length tokens), most recent first;
  // empty where the key is not cached. Does not refresh the row.
  std::vector<std::vector<int32_t>> Followers(absl::Span<const int32_t> leader) const;

  // Keys cached, most recent first (for tests).
  std::vector<std::vector<int32_t>> Keys() const;
  // Every row, most recent first.
  std::vector<Row> Rows() const { return {rows_.begin(), rows_.end()}; }

 private:

  NgramTableShape shape_;
  std::list<Row> rows_;  // most recent first
  absl::flat_hash_map<std::vector<int32_t>, std::list<Row>::iterator> index_;
  std::vector<int32_t> tail_;  // the last leader + follower - 1 tokens learned
};

}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_COMMON_LRU_NGRAM_TABLE_H_
