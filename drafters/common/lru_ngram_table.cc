#include "drafters/common/lru_ngram_table.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace speclab {

LruNgramTable LruNgramTable::FromRows(NgramTableShape shape, std::vector<Row> rows) {
  LruNgramTable table(shape);
  for (Row& row : rows) {
    table.rows_.push_back(std::move(row));
    table.index_.emplace(table.rows_.back().first, std::prev(table.rows_.end()));
  }
  return table;
}

void LruNgramTable::ContinueText(absl::Span<const int32_t> text) {
  const size_t keep = std::min(text.size(), static_cast<size_t>(shape_.leader_length + shape_.follower_length - 1));
  tail_.assign(text.end() - keep, text.end());
}

void LruNgramTable::Learn(absl::Span<const int32_t> tokens) {
  std::vector<int32_t> text = tail_;
  text.insert(text.end(), tokens.begin(), tokens.end());
  const size_t window = static_cast<size_t>(shape_.leader_length + shape_.follower_length);
  for (size_t start = 0; start + window <= text.size(); ++start) {
    const absl::Span<const int32_t> span = absl::MakeConstSpan(text).subspan(start, window);
    Remember(span.subspan(0, shape_.leader_length), span.subspan(shape_.leader_length));
  }
  ContinueText(text);
}

void LruNgramTable::Remember(absl::Span<const int32_t> leader, absl::Span<const int32_t> follower) {
  std::vector<int32_t> key(leader.begin(), leader.end());
  auto found = index_.find(key);
  if (found != index_.end()) {
    rows_.splice(rows_.begin(), rows_, found->second);  // the row to the front
  } else {
    if (static_cast<int>(rows_.size()) >= shape_.rows) {
      index_.erase(rows_.back().first);
      rows_.pop_back();
    }
    rows_.emplace_front(key, std::vector<std::vector<int32_t>>{});
    index_.emplace(std::move(key), rows_.begin());
  }
  std::vector<std::vector<int32_t>>& followers = rows_.front().second;
  std::vector<int32_t> value(follower.begin(), follower.end());
  auto same = std::find(followers.begin(), followers.end(), value);
  if (same != followers.end()) {
    std::rotate(followers.begin(), same, same + 1);  // to the front, the rest in order
    return;
  }
  if (static_cast<int>(followers.size()) >= shape_.columns) followers.pop_back();
  followers.insert(followers.begin(), std::move(value));
}

std::vector<std::vector<int32_t>> LruNgramTable::Followers(absl::Span<const int32_t> leader) const {
  auto found = index_.find(std::vector<int32_t>(leader.begin(), leader.end()));
  if (found == index_.end()) return {};
  return found->second->second;
}

std::vector<std::vector<int32_t>> LruNgramTable::Keys() const {
  std::vector<std::vector<int32_t>> keys;
  for (const Row& row : rows_) keys.push_back(row.first);
  return keys;
}

}  // namespace speclab
