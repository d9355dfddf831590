// `ngram_cache`: Cacheback decoding (docs/algorithms.md §4.10): drafts from
// nothing but an LRU cache of token n-grams learned from the text as it
// goes (drafters/common/lru_ngram_table.h). The last `leader` tokens key a row whose most
// recent followers become the draft: the `trie` builder takes them all as a
// tree, `chain` the most recent; with `recursive`, each follower's own last
// tokens are looked up again to draft past it. Gives tokens only: verify
// with greedy or point_mass. No device form: on CUDA it runs step by step.
//
//   drafter: {type: ngram_cache, leader: 1, follower: 2, rows: 256, columns: 4}
//   tree_builder: {type: trie, budget: 16, max_candidates: 16}
//
// Options: leader (1) and follower (2) n-gram lengths, rows (256) and
// columns (4) of the table (the authors' example's shape), recursive (true),
// transient (false: the table carries over from one prompt to the next, the
// way a cache does; true starts each prompt empty).
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "drafters/common/lru_ngram_table.h"
#include "framework/core/status_macros.h"
#include "framework/drafter.h"

namespace speclab::ngram_cache {
namespace {

struct CacheOptions {
  NgramTableShape shape;
  bool recursive = true;
  bool transient = false;
};

class NgramCacheDrafter final : public Drafter {
 public:
  explicit NgramCacheDrafter(CacheOptions o) : o_(o), table_(o.shape) {}

  DrafterKind kind() const override { return DrafterKind::kTokensOnly; }

  absl::Status Reset(absl::Span<const int32_t> prompt, const TargetFeatures&) override {
    if (o_.transient) table_ = LruNgramTable(o_.shape);
    table_.EndText();
    table_.Learn(prompt);
    context_.assign(prompt.begin(), prompt.end());
    return absl::OkStatus();
  }

  absl::Status BeginStep(absl::Span<const int32_t> context) override {
    if (context.size() < context_.size())
      return absl::FailedPreconditionError("ngram_cache: the context shrank between steps");
    table_.Learn(context.subspan(context_.size()));
    context_.assign(context.begin(), context.end());
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<int32_t>> Continuation(const TokenTree& tree, int node, int max_tokens) override {
    std::vector<int32_t> sequence = SequenceThrough(context_, tree, node);
    const size_t base = sequence.size();
    while (static_cast<int>(sequence.size() - base) < max_tokens) {
      const std::vector<std::vector<int32_t>> followers = FollowersOf(sequence);
      if (followers.empty()) break;
      for (int32_t token : followers.front()) {
        if (static_cast<int>(sequence.size() - base) >= max_tokens) break;
        sequence.push_back(token);
      }
      if (!o_.recursive) break;
    }
    return std::vector<int32_t>(sequence.begin() + base, sequence.end());
  }

  // Breadth first from the node: each path's followers, most recent first,
  // merged into a trie, until `max_candidates` nodes; each node is returned
  // as its path (parents before children).
  absl::StatusOr<std::vector<std::vector<int32_t>>> Continuations(const TokenTree& tree, int node, int max_tokens,
                                                                  int max_candidates) override {
    const std::vector<int32_t> base = SequenceThrough(context_, tree, node);
    std::vector<std::vector<int32_t>> paths;
    absl::flat_hash_map<std::vector<int32_t>, int> seen;
    std::vector<std::vector<int32_t>> frontier = {{}};
    for (size_t next = 0; next < frontier.size(); ++next) {
      const std::vector<int32_t> from = frontier[next];
      if (static_cast<int>(from.size()) >= max_tokens) continue;
      std::vector<int32_t> sequence = base;
      sequence.insert(sequence.end(), from.begin(), from.end());
      for (const std::vector<int32_t>& follower : FollowersOf(sequence)) {
        std::vector<int32_t> path = from;
        bool grew = false;
        for (int32_t token : follower) {
          if (static_cast<int>(path.size()) >= max_tokens) break;
          path.push_back(token);
          if (seen.contains(path)) continue;
          if (static_cast<int>(paths.size()) >= max_candidates) return paths;
          seen.emplace(path, static_cast<int>(paths.size()));
          paths.push_back(path);
          grew = true;
        }
        if (grew && o_.recursive) frontier.push_back(path);
      }
      if (!o_.recursive) break;
    }
    return paths;
  }

  absl::Status EndStep(const TokenTree&, absl::Span<const int>, const TargetFeatures&) override {
    return absl::OkStatus();
  }

 private:
  std::vector<std::vector<int32_t>> FollowersOf(const std::vector<int32_t>& sequence) const {
    const int leader = o_.shape.leader_length;
    if (static_cast<int>(sequence.size()) < leader) return {};
    return table_.Followers(absl::MakeConstSpan(sequence).subspan(sequence.size() - leader));
  }

  CacheOptions o_;
  LruNgramTable table_;
  std::vector<int32_t> context_;
};

absl::StatusOr<std::unique_ptr<Drafter>> Create(Options& options, const DrafterEnvironment&) {
  CacheOptions o;
  auto read = [&](const char* key, int fallback, int lo, int hi, int* out) -> absl::Status {
    ASSIGN_OR_RETURN(int64_t v, options.GetInt(key, fallback));
    if (v < lo || v > hi) return options.Error(key, absl::StrCat("expected an integer in [", lo, ", ", hi, "]"));
    *out = static_cast<int>(v);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(read("leader", o.shape.leader_length, 1, 16, &o.shape.leader_length));
  RETURN_IF_ERROR(read("follower", o.shape.follower_length, 1, 64, &o.shape.follower_length));
  RETURN_IF_ERROR(read("rows", o.shape.rows, 1, 1 << 24, &o.shape.rows));
  RETURN_IF_ERROR(read("columns", o.shape.columns, 1, 256, &o.shape.columns));
  ASSIGN_OR_RETURN(o.recursive, options.GetBool("recursive", o.recursive));
  ASSIGN_OR_RETURN(o.transient, options.GetBool("transient", o.transient));
  return std::unique_ptr<Drafter>(std::make_unique<NgramCacheDrafter>(o));
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "ngram_cache",
    .description = "Cacheback: drafts from an LRU cache of leader n-grams and their recent followers, learned from "
                   "the text as it goes; gives tokens only (trie builder for trees)",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab::ngram_cache
