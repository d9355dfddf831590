// `ngram_cache` (ngram_cache_drafter.h). The last `leader` tokens key a row whose most
// recent followers become the draft: the `trie` builder takes them all as a
// tree, `chain` the most recent; with `recursive`, each follower's own last
// tokens are looked up again to draft past it. Gives tokens only: verify
// with greedy or point_mass. Chains and tries have a device form (the table
// kept on the device, device_ngram_table.h) and run pipelined.
//
//   drafter: {type: ngram_cache, leader: 1, follower: 2, rows: 256, columns: 4}
//   tree_builder: {type: trie, budget: 16, max_candidates: 16}
//
// Options: leader (1) and follower (2) n-gram lengths, rows (256) and
// columns (4) of the table (the authors' example's shape), recursive (true),
// transient (false: the table carries over from one prompt to the next, the
// way a cache does; true starts each prompt empty).
#include "drafters/ngram_cache/ngram_cache_drafter.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "drafters/common/fixed_length.h"
#include "framework/core/status_macros.h"

namespace speclab::ngram_cache {

namespace {

std::vector<std::vector<int32_t>> FollowersIn(const LruNgramTable& table, const std::vector<int32_t>& sequence) {
  const int leader = table.shape().leader_length;
  if (static_cast<int>(sequence.size()) < leader) return {};
  return table.Followers(absl::MakeConstSpan(sequence).subspan(sequence.size() - leader));
}

}  // namespace

std::vector<int32_t> CachedContinuation(const LruNgramTable& table, std::vector<int32_t> sequence, int max_tokens,
                                        bool recursive) {
  const size_t base = sequence.size();
  while (static_cast<int>(sequence.size() - base) < max_tokens) {
    const std::vector<std::vector<int32_t>> followers = FollowersIn(table, sequence);
    if (followers.empty()) break;
    for (int32_t token : followers.front()) {
      if (static_cast<int>(sequence.size() - base) >= max_tokens) break;
      sequence.push_back(token);
    }
    if (!recursive) break;
  }
  return std::vector<int32_t>(sequence.begin() + base, sequence.end());
}

std::vector<int32_t> FixedLengthCachedContinuation(const LruNgramTable& table, const std::vector<int32_t>& sequence,
                                                   int length, bool recursive) {
  return ToFixedLength(CachedContinuation(table, sequence, length, recursive), length, sequence.back());
}

std::vector<std::vector<int32_t>> CachedContinuations(const LruNgramTable& table, const std::vector<int32_t>& sequence,
                                                      int max_tokens, int max_candidates, bool recursive) {
  std::vector<std::vector<int32_t>> paths;
  absl::flat_hash_map<std::vector<int32_t>, int> seen;
  std::vector<std::vector<int32_t>> frontier = {{}};
  for (size_t next = 0; next < frontier.size(); ++next) {
    const std::vector<int32_t> from = frontier[next];
    if (static_cast<int>(from.size()) >= max_tokens) continue;
    std::vector<int32_t> extended = sequence;
    extended.insert(extended.end(), from.begin(), from.end());
    for (const std::vector<int32_t>& follower : FollowersIn(table, extended)) {
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
      if (grew && recursive) frontier.push_back(path);
    }
    if (!recursive) break;
  }
  return paths;
}

absl::Status NgramCacheDrafter::Reset(absl::Span<const int32_t> prompt, const TargetFeatures&) {
  TakeDeviceTable();
  if (o_.transient) table_ = LruNgramTable(o_.shape);
  table_.EndText();
  table_.Learn(prompt);
  context_.assign(prompt.begin(), prompt.end());
  return absl::OkStatus();
}

absl::Status NgramCacheDrafter::BeginStep(absl::Span<const int32_t> context) {
  if (on_device_) {  // pipelined steps learned the text up to `learned`
    const int64_t learned = device_table_->learned();
    if (learned > static_cast<int64_t>(context.size()))
      return absl::FailedPreconditionError("ngram_cache: the context shrank after pipelined steps");
    TakeDeviceTable();
    context_.assign(context.begin(), context.begin() + learned);
    table_.ContinueText(context_);
  }
  if (context.size() < context_.size())
    return absl::FailedPreconditionError("ngram_cache: the context shrank between steps");
  table_.Learn(context.subspan(context_.size()));
  context_.assign(context.begin(), context.end());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> NgramCacheDrafter::Continuation(const TokenTree& tree, int node,
                                                                     int max_tokens) {
  return CachedContinuation(table_, SequenceThrough(context_, tree, node), max_tokens, o_.recursive);
}

absl::StatusOr<std::vector<std::vector<int32_t>>> NgramCacheDrafter::Continuations(const TokenTree& tree, int node,
                                                                                   int max_tokens,
                                                                                   int max_candidates) {
  return CachedContinuations(table_, SequenceThrough(context_, tree, node), max_tokens, max_candidates, o_.recursive);
}

absl::StatusOr<at::Tensor> NgramCacheDrafter::ContinuationAt(const DeviceRoot& root, int length) {
  RETURN_IF_ERROR(PutTableOnDevice(root));
  return device_table_->LearnAndDraft(root.context, root.last_two, root.position.start, length, o_.recursive);
}

absl::StatusOr<DeviceContinuations> NgramCacheDrafter::ContinuationsAt(const DeviceRoot& root, int max_tokens,
                                                                       int max_candidates) {
  RETURN_IF_ERROR(PutTableOnDevice(root));
  return device_table_->LearnAndBranch(root.context, root.last_two, root.position.start, max_tokens, max_candidates,
                                       o_.recursive);
}

absl::Status NgramCacheDrafter::PutTableOnDevice(const DeviceRoot& root) {
  if (!root.context.defined())
    return absl::UnimplementedError("ngram_cache: the step handed over no context on the device");
  if (on_device_) return absl::OkStatus();
  if (!device_table_) device_table_.emplace(o_.shape, device_);
  device_table_->Load(table_, static_cast<int64_t>(context_.size()));
  on_device_ = true;
  return absl::OkStatus();
}

void NgramCacheDrafter::TakeDeviceTable() {
  if (!on_device_) return;
  table_ = LruNgramTable::FromRows(o_.shape, device_table_->Rows());
  on_device_ = false;
}

namespace {

absl::StatusOr<std::unique_ptr<Drafter>> Create(Options& options, const DrafterEnvironment& env) {
  CacheOptions o;
  ASSIGN_OR_RETURN(o.shape.leader_length, options.GetIntIn("leader", o.shape.leader_length, 1, 16));
  ASSIGN_OR_RETURN(o.shape.follower_length, options.GetIntIn("follower", o.shape.follower_length, 1, 64));
  ASSIGN_OR_RETURN(o.shape.rows, options.GetIntIn("rows", o.shape.rows, 1, 1 << 24));
  ASSIGN_OR_RETURN(o.shape.columns, options.GetIntIn("columns", o.shape.columns, 1, 256));
  ASSIGN_OR_RETURN(o.recursive, options.GetBool("recursive", o.recursive));
  ASSIGN_OR_RETURN(o.transient, options.GetBool("transient", o.transient));
  return std::unique_ptr<Drafter>(std::make_unique<NgramCacheDrafter>(o, env.device));
}

const bool kRegistered = DrafterRegistry::Add({
    .name = "ngram_cache",
    .description = "Cacheback: drafts from an LRU cache of leader n-grams and their recent followers, learned from "
                   "the text as it goes; gives tokens only (trie builder for trees); chains and tries pipelined on the device",
    .lossless = "-",
    .create = Create,
});

}  // namespace
}  // namespace speclab::ngram_cache
