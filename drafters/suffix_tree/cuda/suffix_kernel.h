// SuffixDecoding's speculation on CUDA (DeviceSuffixSpeculation): what
// SuffixTrie::Speculate() finds in the generation's trie and in the earlier
// outputs' trie, computed from the texts themselves, without tries.
//
// The node of the context's last m tokens counts their occurrences; the
// subtree under it is their continuations. So a launch finds, for every
// position of each text, how many tokens it ends in common with the context
// (one thread a position); then a block a (text, m) grows the subtree level
// by level: the occurrences still on a kept node are grouped by (node, next
// token) in a hash table in shared memory (rounds where it fills), and each
// level keeps the best `per_level` nodes in best-first order (count, then
// the parent's order, then the first occurrence: the trie's child order).
// No node past those can be among a draft's first max_tokens. Thread 0 then
// pops them best first as the host's queue does. A last launch takes the
// best m of each text, then the better text.
//
// Knows nothing of torch: device_suffix_speculation.cc wraps it. Pointers are
// device pointers; `stream` is a cudaStream_t; launches are asynchronous,
// allocate nothing, never synchronise and return a cudaError_t.
#ifndef SPECLAB_DRAFTERS_SUFFIX_TREE_CUDA_SUFFIX_KERNEL_H_
#define SPECLAB_DRAFTERS_SUFFIX_TREE_CUDA_SUFFIX_KERNEL_H_

#include <cstdint>

namespace speclab {
namespace suffix_decoding {

// What one launch takes: match lengths, and drafted tokens a step.
inline constexpr int kKernelMaxDepth = 64;
inline constexpr int kKernelMaxTokens = 64;

// The texts searched. The sequence is context[0..s) then last_two[0..1] (s =
// *start, the root last); it is the generation's text. The earlier outputs
// follow one another, each after a -1 (a token no text holds).
struct SuffixTexts {
  const int64_t* context;
  const int64_t* last_two;
  const int64_t* start;
  int64_t sequence_capacity;  // s + 2 is at most this
  const int64_t* earlier;     // null: none searched
  int64_t earlier_size;
};

// SpeculationLimits (suffix_trie.h) as a launch takes them.
struct SpeculationShape {
  int max_depth;           // the tries' depth, <= kKernelMaxDepth
  const int32_t* budgets;  // [max_depth + 1] on the device: MatchBudget(limits, m)
  int max_tokens;          // <= kKernelMaxTokens: no budget is larger
  int max_path;
  bool tree;
  double min_token_prob;
};

// Which draft a call gives: the better scored of the two texts' (ties: the
// sequence's; SuffixDecoding), or each text's, the sequence's first
// (Hierarchy Drafting's two most local levels).
enum class TextChoice : int { kBetter = 0, kEach = 1 };

// What a call writes: a trie's candidates (each drafted node's path, in the
// order drafted: candidate c is candidates[c * path_tokens ..] of lengths[c]
// tokens, 0 past the last, the root past each; with kEach, max_candidates
// rows of each text's draft, the sequence's first), or a chain's tokens
// (chain[0] the root, then chain_length tokens: the path, its last token
// repeated, the root where it is empty; with kEach the first text's path
// that is not empty, and found[0] = 1 where there is one, else 0). `seen`
// [3] gets last_two and s, so that the host can read the sequence back
// later.
struct SpeculationOutput {
  TextChoice choice = TextChoice::kBetter;
  int64_t* candidates = nullptr;
  int64_t* lengths = nullptr;
  int max_candidates = 0;
  int path_tokens = 0;
  int64_t* chain = nullptr;
  int chain_length = 0;
  int64_t* found = nullptr;
  int64_t* seen = nullptr;
};

// Bytes of the workspace a call needs for texts of up to `stride` tokens.
int64_t SpeculationWorkspaceBytes(int64_t stride, int max_tokens);

// The drafts SuffixTrie::Speculate() gives of the sequence in the trie of
// the sequence and in that of the earlier outputs (where given), into `out`
// as out.choice says. `stride` >= sequence_capacity and earlier_size.
int LaunchSuffixSpeculation(SuffixTexts texts, SpeculationShape shape, SpeculationOutput out, void* workspace,
                            int64_t stride, void* stream);

}  // namespace suffix_decoding
}  // namespace speclab

#endif  // SPECLAB_DRAFTERS_SUFFIX_TREE_CUDA_SUFFIX_KERNEL_H_
