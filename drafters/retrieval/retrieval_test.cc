// The retrieval drafter (REST): its suffix array, datastore file and lookup
// against brute force, the device lookup's walk against the host's count (on
// the CPU and on CUDA), its options and file errors, and decoding with it:
// greedy's tokens at T = 0 and the target's law at T = 1 on branching trees
// and on pipelined chains.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "drafters/common/fixed_length.h"
#include "drafters/retrieval/datastore.h"
#include "drafters/retrieval/device_rest_lookup.h"
#include "drafters/retrieval/rest_lookup.h"
#include "drafters/retrieval/suffix_array.h"
#include "experiments/datastore_command.h"
#include "framework/device_transfer.h"
#include "framework/speculative_decoder.h"
#include "tests/support/cuda_tests.h"
#include "tests/support/device_roots.h"
#include "tests/support/tiny_models.h"
#include "tests/support/two_token_law.h"

namespace speclab::retrieval {
namespace {

using ::testing::HasSubstr;
using Tokens = std::vector<int32_t>;

Tokens RandomTokens(size_t n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tokens out(n);
  for (auto& t : out) t = static_cast<int32_t>(rng() % vocab);
  return out;
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/retrieval_" + std::to_string(::getpid()) + "_" + name;
}

TEST(SuffixArrayTest, SortsEverySuffixAndFindsEveryOccurrence) {
  for (auto [n, vocab] : {std::pair{1, 2}, std::pair{40, 2}, std::pair{200, 3}, std::pair{300, 50}}) {
    Tokens tokens = RandomTokens(n, vocab, n * 7 + vocab);
    if (n == 40) std::fill(tokens.begin(), tokens.begin() + 20, 1);  // a long run: many doubling rounds
    const std::vector<int64_t> suffixes = BuildSuffixArray(tokens);
    std::vector<int64_t> brute(n);
    for (int i = 0; i < n; ++i) brute[i] = i;
    std::sort(brute.begin(), brute.end(), [&](int64_t a, int64_t b) {
      return std::lexicographical_compare(tokens.begin() + a, tokens.end(), tokens.begin() + b, tokens.end());
    });
    ASSERT_EQ(suffixes, brute) << "n " << n;
    for (const Tokens& query : {Tokens{0}, Tokens{1, 0}, Tokens{0, 0, 1}, Tokens{tokens.back()}, Tokens{99}}) {
      auto [first, last] = MatchRange(tokens, suffixes, query);
      std::vector<int64_t> found(suffixes.begin() + first, suffixes.begin() + last), expected;
      for (int i = 0; i < n; ++i)
        if (i + query.size() <= tokens.size() && std::equal(query.begin(), query.end(), tokens.begin() + i))
          expected.push_back(i);
      std::sort(found.begin(), found.end());
      EXPECT_EQ(found, expected) << "n " << n << " query of " << query.size();
    }
  }
}

// Every prefix of the continuations after the longest matched suffix, counted.
TEST(RestLookupTest, CountsThePrefixesOfTheLongestSuffixsContinuations) {
  const Tokens tokens = RandomTokens(400, 3, 5);
  auto store = Datastore::Build(tokens, 3);
  ASSERT_TRUE(store.ok()) << store.status();
  const Tokens context = {2, 0, 1, 1, 0, 2, 2, 1};
  const RestOptions options{.max_suffix = 6, .min_suffix = 2, .max_matches = 1000, .continuation_tokens = 3};
  const PrefixCounts counts = CountContinuations(*store, context, options, /*max_tokens=*/10);
  // Brute force: the longest suffix (<= 6) occurring in the store, and the
  // prefixes of the 3 tokens after each occurrence.
  int s = 6;
  std::map<Tokens, int64_t> expected;
  for (; s >= 2 && expected.empty(); --s) {
    const Tokens query(context.end() - s, context.end());
    for (size_t i = 0; i + s <= tokens.size(); ++i) {
      if (!std::equal(query.begin(), query.end(), tokens.begin() + i)) continue;
      for (size_t j = 1; j <= 3 && i + s + j <= tokens.size(); ++j)
        ++expected[Tokens(tokens.begin() + i + s, tokens.begin() + i + s + j)];
    }
    if (!expected.empty()) EXPECT_EQ(counts.suffix_length, s);
  }
  ASSERT_FALSE(expected.empty());
  std::map<Tokens, int64_t> got;
  for (size_t i = 0; i < counts.prefixes.size(); ++i) got[counts.Tokens(static_cast<int>(i))] = counts.prefixes[i].count;
  EXPECT_EQ(got, expected);

  // The most frequent prefixes: each one's parent listed before it, counts not increasing.
  const auto best = MostFrequentPrefixes(counts, 6);
  ASSERT_EQ(best.size(), std::min<size_t>(6, expected.size()));
  for (size_t i = 0; i < best.size(); ++i) {
    if (i > 0) EXPECT_GE(expected[best[i - 1]], expected[best[i]]);
    if (best[i].size() > 1) {
      const Tokens parent(best[i].begin(), best[i].end() - 1);
      EXPECT_NE(std::find(best.begin(), best.begin() + i, parent), best.begin() + i) << "prefix " << i;
    }
  }
  // The chain: the most frequent next token at each depth.
  const Tokens path = MostFrequentPath(counts);
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(path.front(), best.front().front());
  EXPECT_TRUE(CountContinuations(*store, {2}, options, 10).prefixes.empty()) << "shorter than min_suffix";
}

// A store of `n` tokens over `vocab` whose text repeats stretches of itself
// (long matches, many tied counts), and sequences ending in pieces of it or
// in noise.
struct LookupCase {
  Datastore store;
  std::vector<Tokens> sequences;
};

LookupCase RandomLookupCase(size_t n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tokens tokens = RandomTokens(n, vocab, seed);
  for (size_t i = 0; i + 40 < n; i += 1 + rng() % 60) {  // copy earlier stretches forward
    const size_t from = rng() % (i + 1), length = 1 + rng() % 30;
    for (size_t k = 0; k < length && i + k < n && from + k < i; ++k) tokens[i + k] = tokens[from + k];
  }
  LookupCase out{.store = *Datastore::Build(tokens, static_cast<uint32_t>(vocab))};
  for (int i = 0; i < 12; ++i) {
    Tokens sequence = RandomTokens(1 + rng() % 40, vocab, seed * 31 + i);
    const size_t from = rng() % n, length = rng() % 25;  // then a piece of the store
    for (size_t k = 0; k < length && from + k < n; ++k) sequence.push_back(tokens[from + k]);
    out.sequences.push_back(std::move(sequence));
  }
  return out;
}

// REST's count as a trie does it: every match's continuation inserted in
// suffix order, a prefix made the first time a (parent, token) pair is seen.
PrefixCounts CountWithATrie(const Datastore& store, absl::Span<const int32_t> sequence, const RestOptions& options,
                            int max_tokens) {
  PrefixCounts out;
  const int64_t n = static_cast<int64_t>(store.tokens.size());
  const int length = std::min(options.continuation_tokens, max_tokens);
  if (length < 1) return out;
  const SuffixMatch match = LongestMatch(store, sequence, options);
  const int s = out.suffix_length = match.suffix_length;
  std::map<std::pair<int, int32_t>, int> child;
  for (int64_t j = match.first; j < match.last; ++j) {
    int parent = -1;
    for (int64_t at = store.suffixes[j] + s; at < std::min(n, store.suffixes[j] + s + length); ++at) {
      auto [found, added] = child.try_emplace({parent, store.tokens[at]}, static_cast<int>(out.prefixes.size()));
      if (added) {
        out.prefixes.push_back({.parent = parent, .token = store.tokens[at],
                                .depth = parent < 0 ? 1 : out.prefixes[parent].depth + 1});
      }
      ++out.prefixes[found->second].count;
      parent = found->second;
    }
  }
  return out;
}

// The count over the suffix array's runs lists the prefixes a trie would
// make, in the trie's order, with its counts (MostFrequentPrefixes' and
// MostFrequentPath's ties depend on the order).
TEST(RestLookupTest, CountsAsATrieOfTheMatchesWould) {
  int compared = 0;
  for (auto [n, vocab] : {std::pair{1, 2}, std::pair{60, 2}, std::pair{400, 3}, std::pair{3000, 8}}) {
    const LookupCase cases = RandomLookupCase(n, vocab, n + vocab + 1);
    for (const Tokens& sequence : cases.sequences) {
      for (RestOptions options : {RestOptions{}, RestOptions{.max_suffix = 4, .min_suffix = 1, .max_matches = 2,
                                                             .continuation_tokens = 3}}) {
        for (int length : {0, 1, 5, 12}) {
          const PrefixCounts got = CountContinuations(cases.store, sequence, options, length);
          const PrefixCounts expected = CountWithATrie(cases.store, sequence, options, length);
          ASSERT_EQ(got.suffix_length, expected.suffix_length);
          ASSERT_EQ(got.prefixes.size(), expected.prefixes.size()) << "store of " << n << ", length " << length;
          for (size_t i = 0; i < got.prefixes.size(); ++i) {
            const auto& a = got.prefixes[i];
            const auto& b = expected.prefixes[i];
            EXPECT_TRUE(a.parent == b.parent && a.token == b.token && a.depth == b.depth && a.count == b.count)
                << "prefix " << i << " of a store of " << n;
          }
          compared += !expected.prefixes.empty();
        }
      }
    }
  }
  EXPECT_GT(compared, 50);
}

// The walk over the suffix array's runs drafts the chain of the count over
// prefixes: every option's edge (one match read, continuations cut by the
// datastore's end, the minimum suffix of one token, drafts longer than the
// continuations).
TEST(RestLookupTest, RunWalkGivesTheMostFrequentPath) {
  int compared = 0, nonempty = 0;
  for (auto [n, vocab] : {std::pair{1, 2}, std::pair{60, 2}, std::pair{400, 3}, std::pair{3000, 8}}) {
    const LookupCase cases = RandomLookupCase(n, vocab, n + vocab);
    for (const Tokens& sequence : cases.sequences) {
      for (RestOptions options : {RestOptions{}, RestOptions{.max_suffix = 4, .min_suffix = 1, .max_matches = 1,
                                                             .continuation_tokens = 3},
                                  RestOptions{.max_suffix = 40, .min_suffix = 1, .max_matches = 7,
                                              .continuation_tokens = 12}}) {
        for (int length : {0, 1, 5, 12}) {
          const Tokens expected = MostFrequentPath(CountContinuations(cases.store, sequence, options, length));
          EXPECT_EQ(RunWalkPath(cases.store, sequence, options, length), expected)
              << "store of " << n << ", sequence of " << sequence.size() << ", max_matches " << options.max_matches
              << ", length " << length;
          ++compared;
          nonempty += !expected.empty();
        }
      }
    }
  }
  EXPECT_GT(nonempty, compared / 3) << "most lookups found something";
  EXPECT_EQ(ToFixedLength({4, 5}, 4, 9), (Tokens{4, 5, 5, 5}));
  EXPECT_EQ(ToFixedLength({4, 5, 6}, 2, 9), (Tokens{4, 5}));
  EXPECT_EQ(ToFixedLength({}, 3, 9), (Tokens{9, 9, 9}));
}

// Pipelined steps on `device`: each hands over the sequence so far
// (root.context, then the root and the token before it) and must draft the
// root, then ToFixedLength(MostFrequentPath(...)) of the host's count.
// Returns how many lookups found a path.
int ExpectDeviceLookupFollowsTheHost(c10::Device device, size_t n, int vocab, RestOptions options,
                                     const std::vector<int>& lengths) {
  const LookupCase cases = RandomLookupCase(n, vocab, n * 3 + vocab);
  EXPECT_TRUE(DeviceRestLookup::Takes(options).ok());
  const auto store = std::make_shared<const Datastore>(cases.store);
  const DeviceRestLookup lookup(store, options, device);
  int found = 0;
  for (const Tokens& sequence : cases.sequences) {
    if (sequence.size() < 2) continue;
    // Stale entries past the root are never read.
    const DeviceRoot root = testing::RootOfSequence(sequence, device, 8, vocab + 7);
    for (int length : lengths) {
      auto drafted = lookup.Draft(root.context, root.last_two, root.position.start, length);
      EXPECT_TRUE(drafted.ok()) << drafted.status();
      if (!drafted.ok()) return found;
      const at::Tensor host = drafted->cpu();
      const std::vector<int64_t> got(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel());
      const Tokens path = MostFrequentPath(CountContinuations(*store, sequence, options, length));
      std::vector<int64_t> expected{sequence.back()};
      for (int32_t t : ToFixedLength(path, length, sequence.back())) expected.push_back(t);
      EXPECT_EQ(got, expected) << "store of " << n << ", sequence of " << sequence.size() << ", length " << length;
      found += !path.empty();
    }
  }
  return found;
}

// As ExpectDeviceLookupFollowsTheHost, for a trie's candidates: every
// candidate of MostFrequentPrefixes() of the host's count, and its length,
// the root past it. Returns how many candidates were found in all.
int ExpectDeviceCandidatesFollowTheHost(c10::Device device, size_t n, int vocab, RestOptions options,
                                        const std::vector<std::pair<int, int>>& shapes) {
  const LookupCase cases = RandomLookupCase(n, vocab, n * 5 + vocab);
  const auto store = std::make_shared<const Datastore>(cases.store);
  const DeviceRestLookup lookup(store, options, device);
  int found = 0;
  for (const Tokens& sequence : cases.sequences) {
    if (sequence.size() < 2) continue;
    const DeviceRoot root = testing::RootOfSequence(sequence, device, 8, vocab + 7);
    for (auto [max_tokens, max_candidates] : shapes) {
      auto got = lookup.Candidates(root.context, root.last_two, root.position.start, max_tokens, max_candidates);
      EXPECT_TRUE(got.ok()) << got.status();
      if (!got.ok()) return found;
      const auto expected =
          MostFrequentPrefixes(CountContinuations(*store, sequence, options, max_tokens), max_candidates);
      testing::ExpectContinuations(*got, expected, sequence.back(),
                                   absl::StrCat("store of ", n, ", sequence of ", sequence.size(), ", ",
                                                max_candidates, " of ", max_tokens));
      found += static_cast<int>(expected.size());
    }
  }
  return found;
}

TEST(RetrievalDrafterTest, DeviceLookupDraftsAsTheHost) {
  const c10::Device cpu(c10::kCPU);
  EXPECT_GT(ExpectDeviceLookupFollowsTheHost(cpu, 400, 3, {}, {0, 1, 6}), 0);
  EXPECT_GT(ExpectDeviceLookupFollowsTheHost(cpu, 2000, 5, {.max_suffix = 40, .min_suffix = 1, .max_matches = 3,
                                                            .continuation_tokens = 4}, {3, 7}), 0);
  EXPECT_GT(ExpectDeviceCandidatesFollowTheHost(cpu, 400, 3, {}, {{4, 8}, {12, 64}}), 100);
  EXPECT_THAT(std::string(DeviceRestLookup::Takes({.max_matches = 9000}).message()),
              HasSubstr("reads at most 8192 matches; max_matches is 9000"));
}

// The kernel: a suffix array searched in several rounds of 32 probes, runs
// longer than the block's 1024 threads, 33 suffix lengths in two rounds of
// warps, the most matches the kernel holds.
TEST(RetrievalDrafterTest, CudaKernelDraftsAsTheHost) {
  SPECLAB_SKIP_UNLESS_CUDA();
  const c10::Device cuda(c10::kCUDA);
  ExpectDeviceLookupFollowsTheHost(cuda, 1, 2, {}, {0, 3});  // nothing to find: the fill alone
  EXPECT_GT(ExpectDeviceLookupFollowsTheHost(cuda, 400, 3, {}, {0, 1, 6, 12}), 0);
  EXPECT_GT(ExpectDeviceLookupFollowsTheHost(cuda, 200000, 4, {}, {5, 10}), 0);
  EXPECT_GT(ExpectDeviceLookupFollowsTheHost(cuda, 200000, 2, {.max_suffix = 33, .min_suffix = 1,
                                                               .max_matches = 8192, .continuation_tokens = 10},
                                             {8}), 0);
  EXPECT_GT(ExpectDeviceLookupFollowsTheHost(cuda, 50000, 30, {.max_suffix = 40, .min_suffix = 1, .max_matches = 2,
                                                               .continuation_tokens = 3}, {1, 7}), 0);
  // Trees: a store too short for a match; ties at the threshold count
  // across depths and threads (8192 matches over two tokens); one or two
  // matches; candidates longer than the continuations.
  ExpectDeviceCandidatesFollowTheHost(cuda, 1, 2, {}, {{3, 4}});
  EXPECT_GT(ExpectDeviceCandidatesFollowTheHost(cuda, 400, 3, {}, {{1, 1}, {4, 8}, {12, 64}}), 100);
  EXPECT_GT(ExpectDeviceCandidatesFollowTheHost(cuda, 200000, 2, {.max_suffix = 33, .min_suffix = 1,
                                                                  .max_matches = 8192, .continuation_tokens = 10},
                                                {{8, 64}, {10, 17}}), 100);
  EXPECT_GT(ExpectDeviceCandidatesFollowTheHost(cuda, 200000, 4, {}, {{5, 16}, {10, 64}}), 100);
  EXPECT_GT(ExpectDeviceCandidatesFollowTheHost(cuda, 50000, 30, {.max_suffix = 40, .min_suffix = 1,
                                                                  .max_matches = 2, .continuation_tokens = 3},
                                                {{7, 8}}), 10);
}

TEST(DatastoreTest, RoundTripsAndRefusesDamagedFiles) {
  auto store = Datastore::Build(RandomTokens(100, 5, 1), 5);
  ASSERT_TRUE(store.ok());
  const std::string path = TempPath("round_trip.splds");
  ASSERT_TRUE(WriteDatastore(*store, path).ok());
  auto read = ReadDatastore(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->tokens, store->tokens);
  EXPECT_EQ(read->suffixes, store->suffixes);
  EXPECT_EQ(read->vocab_size, 5u);
  EXPECT_THAT(std::string(Datastore::Build({0, 7}, 5).status().message()), HasSubstr("token 1 is 7, outside"));

  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& name, const std::string& content) {
    const std::string damaged = TempPath(name);
    std::ofstream(damaged, std::ios::binary) << content;
    return std::string(ReadDatastore(damaged).status().message());
  };
  EXPECT_THAT(write("truncated.splds", bytes.substr(0, bytes.size() - 3)), HasSubstr("truncated or corrupt"));
  EXPECT_THAT(write("foreign.splds", "PK\x03\x04 not a datastore"), HasSubstr("not a speclab datastore"));
  std::string swapped = bytes;  // two suffix-array entries exchanged
  const size_t sa = 8 + 8 + 4 + 100 * 4;
  std::swap_ranges(swapped.begin() + sa, swapped.begin() + sa + 8, swapped.begin() + sa + 8);
  EXPECT_THAT(write("swapped.splds", swapped), HasSubstr("out of order"));
  std::string foreign_token = bytes;  // token 0 set to 9, beyond the vocabulary of 5
  foreign_token[20] = 9;
  EXPECT_THAT(write("token.splds", foreign_token), HasSubstr("outside the vocabulary"));
  EXPECT_THAT(std::string(ReadDatastore(TempPath("absent.splds")).status().message()), HasSubstr("no such datastore"));
}

TEST(DatastoreCommandTest, BuildsFromTextAndTokenFiles) {
  const std::string text = TempPath("docs.txt");
  std::ofstream(text) << "the cat sat\n<|endoftext|>\nthe cat ran\n<|endoftext|>\n";
  const std::string out = TempPath("text.splds");
  auto flags = ParseDatastoreFlags({"--tokenizer", std::string(SPECLAB_SOURCE_DIR) + "/models/speclab-target",
                                    "--out", out, text});
  ASSERT_TRUE(flags.ok()) << flags.status();
  ASSERT_TRUE(RunDatastore(*flags).ok());
  auto store = ReadDatastore(out);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(store->vocab_size, 8000u);
  EXPECT_EQ(std::count(store->tokens.begin(), store->tokens.end(), 1), 2) << "BOS per document";

  const std::string ids = TempPath("ids.i32");
  const std::vector<int32_t> values = {3, 1, 4, 1, 5};
  std::ofstream(ids, std::ios::binary).write(reinterpret_cast<const char*>(values.data()), 20);
  auto token_flags = ParseDatastoreFlags({"--token-files", "--vocab-size", "6", "--out", out, ids});
  ASSERT_TRUE(token_flags.ok()) << token_flags.status();
  ASSERT_TRUE(RunDatastore(*token_flags).ok());
  EXPECT_EQ(ReadDatastore(out)->tokens, values);

  auto small = ParseDatastoreFlags({"--token-files", "--vocab-size", "4", "--out", out, ids});
  EXPECT_THAT(std::string(RunDatastore(*small).message()), HasSubstr("datastore: token 2 is 4, outside the vocabulary [0, 4)"));
  EXPECT_THAT(std::string(ParseDatastoreFlags({"--out", out, ids}).status().message()),
              HasSubstr("give --tokenizer for text files, or --token-files"));
  EXPECT_THAT(std::string(ParseDatastoreFlags({"--tokenizer", "t", ids}).status().message()), HasSubstr("--out"));
  EXPECT_THAT(std::string(ParseDatastoreFlags({"--token-files", "--out", out, ids}).status().message()),
              HasSubstr("--token-files and --vocab-size go together"));
}

// A datastore of the target's own greedy continuation (and noise), so that
// retrieval drafts get accepted.
std::string TargetDatastore(LlamaModel& target, const Tokens& prompt, const std::string& name) {
  auto greedy = GenerateAutoregressive(target, prompt, {.sampling = {.temperature = 0}, .max_new_tokens = 24});
  EXPECT_TRUE(greedy.ok());
  Tokens tokens = prompt;
  tokens.insert(tokens.end(), greedy->tokens.begin(), greedy->tokens.end());
  const Tokens noise = RandomTokens(200, static_cast<int>(target.config().vocab_size), 3);
  tokens.insert(tokens.end(), noise.begin(), noise.end());
  auto store = Datastore::Build(tokens, static_cast<uint32_t>(target.config().vocab_size));
  EXPECT_TRUE(store.ok());
  const std::string path = TempPath(name);
  EXPECT_TRUE(WriteDatastore(*store, path).ok());
  return path;
}

const Tokens kPrompt = {1, 5, 3, 7, 2, 5, 3};

TEST(RetrievalDrafterTest, EqualsGreedyAtTemperatureZero) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  const std::string store = TargetDatastore(*target, kPrompt, "greedy.splds");
  auto greedy = GenerateAutoregressive(*target, kPrompt, {.sampling = {.temperature = 0}, .max_new_tokens = 30});
  ASSERT_TRUE(greedy.ok());
  for (const char* builder : {"{type: chain}", "{type: trie, budget: 12, max_candidates: 12}"}) {
    for (const char* verifier : {"{type: greedy}", "{type: point_mass}"}) {
      auto method = testing::MethodFromYaml(
          absl::StrCat("{name: rest, drafter: {type: retrieval, datastore: ", store, ", min_suffix: 1}, tree_builder: ",
                       builder, ", verifier: ", verifier, ", length_policy: {type: fixed, gamma: 5}}"),
          target.get());
      ASSERT_TRUE(method.ok()) << method.status();
      auto out = GenerateSpeculative(*target, *method, kPrompt, {.sampling = {.temperature = 0}, .max_new_tokens = 30});
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->tokens, greedy->tokens) << builder << " " << verifier;
      int accepted = 0;
      for (const StepStats& step : out->steps) accepted += step.accepted;
      EXPECT_GT(accepted, 10) << builder << ": the datastore holds greedy's continuation";
    }
  }
}

TEST(RetrievalDrafterTest, TrieMatchesTargetLawAtTemperatureOne) {
  constexpr int kRuns = 2000;
  auto target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const std::string store = TargetDatastore(*target, kPrompt, "law.splds");
  auto method = testing::MethodFromYaml(
      absl::StrCat("{name: rest, drafter: {type: retrieval, datastore: ", store, ", min_suffix: 1}, ",
                   "tree_builder: {type: trie, budget: 8, max_candidates: 8}, verifier: {type: point_mass}, ",
                   "length_policy: {type: fixed, gamma: 3}}"),
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  const auto law = testing::ExactTwoTokenLaw(*target, kPrompt, 1.0);
  testing::TwoTokenCounts counts;
  int accepted = 0, branching = 0;
  for (int i = 0; i < kRuns; ++i) {
    auto out = GenerateSpeculative(*target, *method, kPrompt, {.sampling = {.temperature = 1}, .max_new_tokens = 2,
                                                                .seed = static_cast<uint64_t>(1000 + i)});
    ASSERT_TRUE(out.ok()) << out.status();
    ++counts[{out->tokens[0], out->tokens[1]}];
    for (const StepStats& step : out->steps) {
      accepted += step.accepted;
      branching += step.tree_nodes > step.longest_path;
    }
  }
  const testing::ChiSquareResult result = testing::ChiSquareTest(counts, law, kRuns);
  EXPECT_LT(result.statistic, result.critical) << "dof " << result.degrees_of_freedom;
  EXPECT_GT(accepted, kRuns / 20);
  EXPECT_GT(branching, kRuns / 10) << "the trees branched";
}

// Pipelined chains draft on the device: greedy's tokens at T = 0; options
// the device lookup cannot take, or drafts longer than the continuations,
// step on the host and say why.
TEST(RetrievalDrafterTest, PipelinedChainsEqualGreedy) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  const std::string store = TargetDatastore(*target, kPrompt, "pipelined.splds");
  auto greedy = GenerateAutoregressive(*target, kPrompt, {.sampling = {.temperature = 0}, .max_new_tokens = 30});
  ASSERT_TRUE(greedy.ok());
  for (auto [options, gamma, form] : {std::tuple{"min_suffix: 1", 5, "pipelined chain"},
                                      std::tuple{"min_suffix: 1, continuation_tokens: 4", 5,
                                                 "continuation_tokens allows 4"},
                                      std::tuple{"max_matches: 9000", 5, "reads at most 8192 matches"}}) {
    auto method = testing::MethodFromYaml(
        absl::StrCat("{name: rest, drafter: {type: retrieval, datastore: ", store, ", ", options,
                     "}, verifier: {type: greedy}, length_policy: {type: fixed, gamma: ", gamma, "}}"),
        target.get());
    ASSERT_TRUE(method.ok()) << method.status();
    auto out = GenerateSpeculative(*target, *method, kPrompt,
                                   {.sampling = {.temperature = 0}, .max_new_tokens = 30, .pipeline = true});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->tokens, greedy->tokens) << options;
    EXPECT_THAT(out->engine_form, HasSubstr(form));
    int accepted = 0;
    for (const StepStats& step : out->steps) accepted += step.accepted;
    EXPECT_GT(accepted, 10) << options;
  }
}

// REST's tries pipelined: greedy's tokens at T = 0, the target's law at T = 1
// (pipelined and step by step), trees that branch.
TEST(RetrievalDrafterTest, PipelinedTriesEqualGreedyAndKeepTheLaw) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  const std::string store = TargetDatastore(*target, kPrompt, "pipelined_trie.splds");
  auto greedy = GenerateAutoregressive(*target, kPrompt, {.sampling = {.temperature = 0}, .max_new_tokens = 30});
  ASSERT_TRUE(greedy.ok());
  const std::string trie = "tree_builder: {type: trie, budget: 8, max_candidates: 8}, verifier: {type: point_mass}, "
                           "length_policy: {type: fixed, gamma: 3}}";
  auto method = testing::MethodFromYaml(
      absl::StrCat("{name: rest, drafter: {type: retrieval, datastore: ", store, ", min_suffix: 1}, ", trie),
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  auto out = GenerateSpeculative(*target, *method, kPrompt,
                                 {.sampling = {.temperature = 0}, .max_new_tokens = 30, .pipeline = true});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->tokens, greedy->tokens);
  EXPECT_THAT(out->engine_form, HasSubstr("pipelined tree"));
  int accepted = 0;
  for (const StepStats& step : out->steps) accepted += step.accepted;
  EXPECT_GT(accepted, 10);

  auto law_target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  auto law_method = testing::MethodFromYaml(
      absl::StrCat("{name: rest, drafter: {type: retrieval, datastore: ",
                   TargetDatastore(*law_target, kPrompt, "pipelined_trie_law.splds"), ", min_suffix: 1}, ", trie),
      law_target.get());
  ASSERT_TRUE(law_method.ok()) << law_method.status();
  testing::ExpectTheLawPipelinedAndStepByStep(*law_target, *law_method, kPrompt,
                                              testing::ExactTwoTokenLaw(*law_target, kPrompt, 1.0), 2000,
                                              "retrieval trie");
}

TEST(RetrievalDrafterTest, PipelinedChainsMatchTargetLawAtTemperatureOne) {
  auto target = testing::TinyModel(7, /*vocab=*/8, /*layers=*/1, /*logit_scale=*/40);
  const std::string store = TargetDatastore(*target, kPrompt, "pipelined_law.splds");
  auto method = testing::MethodFromYaml(
      absl::StrCat("{name: rest, drafter: {type: retrieval, datastore: ", store, ", min_suffix: 1}, ",
                   "verifier: {type: point_mass}, length_policy: {type: fixed, gamma: 3}}"),
      target.get());
  ASSERT_TRUE(method.ok()) << method.status();
  testing::ExpectTheLawPipelinedAndStepByStep(*target, *method, kPrompt,
                                              testing::ExactTwoTokenLaw(*target, kPrompt, 1.0), 2000,
                                              "retrieval chain");
}

TEST(RetrievalDrafterTest, OptionAndFileErrorsNameTheKey) {
  auto target = testing::TinyModel(3, /*vocab=*/8);
  auto create = [&](const std::string& drafter) {
    return testing::MethodFromYaml(absl::StrCat("{name: rest, drafter: ", drafter, ", verifier: {type: greedy}}"),
                                   target.get())
        .status();
  };
  EXPECT_THAT(std::string(create("{type: retrieval}").message()), HasSubstr("key 'drafter.datastore': missing required key"));
  EXPECT_THAT(std::string(create("{type: retrieval, datastore: /nonexistent.splds}").message()),
              HasSubstr("no such datastore"));
  const std::string store = TempPath("ok.splds");
  ASSERT_TRUE(WriteDatastore(*Datastore::Build({1, 2, 3}, 8), store).ok());
  EXPECT_THAT(std::string(create(absl::StrCat("{type: retrieval, datastore: ", store, ", min_suffix: 20}")).message()),
              HasSubstr("key 'drafter.min_suffix': expected an integer in [1, max_suffix = 16]"));
  EXPECT_THAT(std::string(create(absl::StrCat("{type: retrieval, datastore: ", store, ", suffix: 3}")).message()),
              HasSubstr("unknown key 'drafter.suffix'"));
  const std::string wide = TempPath("wide.splds");
  ASSERT_TRUE(WriteDatastore(*Datastore::Build({1, 2, 3}, 9000), wide).ok());
  EXPECT_THAT(std::string(create(absl::StrCat("{type: retrieval, datastore: ", wide, "}")).message()),
              HasSubstr("holds ids of a vocabulary of 9000 tokens, but the target's has 8"));
}

}  // namespace
}  // namespace speclab::retrieval
