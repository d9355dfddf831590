// GenerationTries: the suffix tries a model-free drafter keeps of the text it
// has seen: one of the current prompt and its generation so far, and one of
// the outputs of earlier generations (an output joins them when the next
// prompt starts). SuffixDecoding's two trees (suffix_tree) and Hierarchy
// Drafting's two most local databases (hierarchy).
#ifndef SPECLAB_DRAFTERS_SUFFIX_TREE_GENERATION_TRIES_H_
#define SPECLAB_DRAFTERS_SUFFIX_TREE_GENERATION_TRIES_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "drafters/suffix_tree/suffix_trie.h"

namespace speclab::suffix_decoding {

class GenerationTries {
 public:
  // Tries counting substrings of up to `max_depth` tokens; without
  // `keep_earlier`, earlier outputs are not kept.
  GenerationTries(int max_depth, bool keep_earlier);

  // A new prompt: the last generation's output joins the earlier ones.
  void Reset(absl::Span<const int32_t> prompt);
  // The context at a step's start (the prompt and every token generated):
  // its new tokens join the generation. `drafter` names the caller in the
  // error where the context shrank.
  absl::Status BeginStep(absl::Span<const int32_t> context, const char* drafter);

  const SuffixTrie& generation() const { return generation_; }
  const SuffixTrie& earlier() const { return earlier_; }
  // Advanced over this generation's context, for earlier().Speculate().
  const SuffixCursor& earlier_cursor() const { return earlier_cursor_; }
  const std::vector<int32_t>& context() const { return context_; }
  // This generation's output so far (what joins the earlier ones at Reset).
  const std::vector<int32_t>& output() const { return output_; }

 private:
  int max_depth_;
  bool keep_earlier_;
  SuffixTrie generation_;  // this prompt and its generation so far
  SuffixTrie earlier_;     // earlier generations' outputs
  SuffixCursor earlier_cursor_;
  std::vector<int32_t> output_;
  std::vector<int32_t> context_;
  size_t seen_ = 0;
};

}  // namespace speclab::suffix_decoding

#endif  // SPECLAB_DRAFTERS_SUFFIX_TREE_GENERATION_TRIES_H_
