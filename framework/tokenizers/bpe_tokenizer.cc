#include "framework/tokenizers/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "framework/core/json.h"
#include "framework/core/status_macros.h"
#include "framework/tokenizers/unicode.h"

namespace speclab {
namespace {

namespace fs = std::filesystem;
using unicode::CharClass;

// Abseil here may predate std::string_view support in StrCat and in
// heterogeneous lookup.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// ------------------------------------------------------------------------
// Byte-level alphabet: GPT-2's bytes_to_unicode(). Printable bytes stand for
// themselves; the other 68 map to U+0100, U+0101, ... in byte order.

struct ByteAlphabet {
  std::array<char32_t, 256> byte_to_char;
  std::array<std::string, 256> byte_to_utf8;
  // The byte each character stands for, or -1; indexed by code point.
  std::array<int16_t, 0x144> char_to_byte;
};

const ByteAlphabet& Alphabet() {
  static const ByteAlphabet* alphabet = [] {
    auto* a = new ByteAlphabet();
    a->char_to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      a->byte_to_char[b] = printable ? b : 256 + n++;
      unicode::AppendUtf8(a->byte_to_char[b], &a->byte_to_utf8[b]);
      a->char_to_byte[a->byte_to_char[b]] = static_cast<int16_t>(b);
    }
    return a;
  }();
  return *alphabet;
}

// ------------------------------------------------------------------------
// Pre-tokenizer regexes, matched by hand. Each matcher returns the end of
// the match that the regex (leftmost alternative first, greedy quantifiers
// with backtracking, as Oniguruma does) finds at `i`, or `i` if none.

enum class Pattern { kGpt2, kLlama3, kQwen2, kLiteral };

constexpr std::string_view kGpt2Regex =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
// Llama-3's, which is also OpenAI's cl100k_base (GPT-4) pattern.
constexpr std::string_view kLlama3Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Qwen2's (also Qwen2.5 and Qwen3): single digits.
constexpr std::string_view kQwen2Regex =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

constexpr CharClass kL = CharClass::kLetter;
constexpr CharClass kN = CharClass::kNumber;
constexpr CharClass kS = CharClass::kSpace;
constexpr CharClass kO = CharClass::kOther;

bool IsCrLf(char32_t c) { return c == '\r' || c == '\n'; }

// 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive. Under Unicode case
// folding U+017F LATIN SMALL LETTER LONG S folds to 's' (the Kelvin sign
// folds to 'k', which no alternative uses).
size_t MatchContraction(const char32_t* s, size_t n, size_t i, bool ignore_case) {
  if (s[i] != '\'' || i + 1 >= n) return i;
  auto fold = [ignore_case](char32_t c) -> char32_t {
    if (!ignore_case) return c;
    if (c >= 'A' && c <= 'Z') return c + ('a' - 'A');
    if (c == 0x17F) return 's';
    return c;
  };
  const char32_t a = fold(s[i + 1]);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  if (i + 2 < n) {
    const char32_t b = fold(s[i + 2]);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
      return i + 3;
    }
  }
  return i;
}

// \s+(?!\S)|\s+ at a whitespace character: the run, less its last character
// when a non-space follows and the run has two or more.
size_t MatchSpaceRun(const CharClass* cls, size_t n, size_t i) {
  size_t j = i;
  while (j < n && cls[j] == kS) ++j;
  if (j < n && j - i >= 2) return j - 1;
  return j;
}

// ' ?X+' where X is the class `want`.
size_t MatchOptionalSpaceRun(const char32_t* s, const CharClass* cls, size_t n, size_t i,
                             CharClass want) {
  size_t j = i;
  if (s[j] == ' ' && j + 1 < n && cls[j + 1] == want) ++j;
  if (cls[j] != want) return i;
  while (j < n && cls[j] == want) ++j;
  return j;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t MatchGpt2(const char32_t* s, const CharClass* cls, size_t n, size_t i) {
  size_t end = MatchContraction(s, n, i, /*ignore_case=*/false);
  if (end > i) return end;
  for (CharClass want : {kL, kN, kO}) {
    end = MatchOptionalSpaceRun(s, cls, n, i, want);
    if (end > i) return end;
  }
  if (cls[i] == kS) return MatchSpaceRun(cls, n, i);
  return i;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t MatchLlama3(const char32_t* s, const CharClass* cls, size_t n, size_t i, size_t max_digits) {
  size_t end = MatchContraction(s, n, i, /*ignore_case=*/true);
  if (end > i) return end;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  size_t j = i;
  if (cls[j] != kL && cls[j] != kN && !IsCrLf(s[j]) && j + 1 < n && cls[j + 1] == kL) ++j;
  if (cls[j] == kL) {
    while (j < n && cls[j] == kL) ++j;
    return j;
  }
  // \p{N}{1,max_digits}
  if (cls[i] == kN) {
    j = i + 1;
    while (j < n && j - i < max_digits && cls[j] == kN) ++j;
    return j;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  end = MatchOptionalSpaceRun(s, cls, n, i, kO);
  if (end > i) {
    while (end < n && IsCrLf(s[end])) ++end;
    return end;
  }
  if (cls[i] != kS) return i;
  // \s*[\r\n]+ : up to the last line break of the whitespace run.
  j = i;
  size_t last_break = n;
  while (j < n && cls[j] == kS) {
    if (IsCrLf(s[j])) last_break = j;
    ++j;
  }
  if (last_break < n) return last_break + 1;
  return MatchSpaceRun(cls, n, i);
}

// ------------------------------------------------------------------------
// Pre-tokenizer steps.

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizerStep {
  enum class Kind { kSplit, kPrefixSpace } kind = Kind::kSplit;
  Pattern pattern = Pattern::kGpt2;
  std::u32string literal;  // for Pattern::kLiteral
  Behavior behavior = Behavior::kIsolated;
  bool invert = false;
};

struct Span {
  size_t begin;
  size_t end;
  bool flag;  // is a match / is to be removed
};

// The spans of s[0, n) that the step's pattern matches and those between
// them, covering it in order (as `tokenizers`' Pattern::find_matches).
// `cls` holds the classes of s (unused for a literal pattern).
void FindMatches(const PreTokenizerStep& step, const char32_t* s, const CharClass* cls, size_t n,
                 std::vector<Span>* out) {
  out->clear();
  if (n == 0) {
    out->push_back({0, 0, false});
    return;
  }
  size_t prev = 0;
  auto add_match = [&](size_t begin, size_t end) {
    if (begin > prev) out->push_back({prev, begin, false});
    out->push_back({begin, end, true});
    prev = end;
  };
  if (step.pattern == Pattern::kLiteral) {
    const std::u32string_view text(s, n);
    if (!step.literal.empty()) {
      for (size_t at = text.find(step.literal); at != std::u32string_view::npos;
           at = text.find(step.literal, at + step.literal.size())) {
        add_match(at, at + step.literal.size());
      }
    }
  } else {
    size_t i = 0;
    while (i < n) {
      size_t end;
      switch (step.pattern) {
        case Pattern::kGpt2:
          end = MatchGpt2(s, cls, n, i);
          break;
        case Pattern::kLlama3:
          end = MatchLlama3(s, cls, n, i, 3);
          break;
        default:
          end = MatchLlama3(s, cls, n, i, 1);
          break;
      }
      if (end > i) {
        add_match(i, end);
        i = end;
      } else {
        ++i;
      }
    }
  }
  if (prev < n) out->push_back({prev, n, false});
}

// Splits the piece s[0, n) by a Split step (the semantics of `tokenizers`'
// NormalizedString::split), appending the non-empty pieces, offset by
// `base`, to `out`.
void ApplySplit(const PreTokenizerStep& step, const char32_t* s, const CharClass* cls, size_t n,
                size_t base, std::vector<Span>* out, std::vector<Span>* matches,
                std::vector<Span>* splits) {
  FindMatches(step, s, cls, n, matches);
  if (step.invert) {
    for (Span& m : *matches) m.flag = !m.flag;
  }
  const std::vector<Span>* result = splits;
  splits->clear();
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::kRemoved:
      result = matches;  // flag: is a match, i.e. removed
      break;
    case Behavior::kIsolated:
      for (Span& m : *matches) m.flag = false;
      result = matches;
      break;
    case Behavior::kContiguous:
      for (const Span& m : *matches) {
        if (m.flag == previous_match && !splits->empty()) {
          splits->back().end = m.end;
        } else {
          splits->push_back({m.begin, m.end, false});
        }
        previous_match = m.flag;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Span& m : *matches) {
        if (m.flag && !previous_match && !splits->empty()) {
          splits->back().end = m.end;
        } else {
          splits->push_back({m.begin, m.end, false});
        }
        previous_match = m.flag;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = matches->rbegin(); it != matches->rend(); ++it) {
        if (it->flag && !previous_match && !splits->empty()) {
          splits->back().begin = it->begin;
        } else {
          splits->push_back({it->begin, it->end, false});
        }
        previous_match = it->flag;
      }
      std::reverse(splits->begin(), splits->end());
      break;
  }
  for (const Span& span : *result) {
    if (span.flag || span.end == span.begin) continue;
    out->push_back({base + span.begin, base + span.end, false});
  }
}

// ------------------------------------------------------------------------
// Added tokens.

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

struct Segment {
  size_t begin;
  size_t end;
  const AddedToken* token;  // nullptr: plain text
};

// The code point that ends text[0, pos) (pos > 0).
char32_t CharBefore(std::string_view text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  char32_t c = 0;
  size_t at = start;
  if (!unicode::DecodeUtf8(text, &at, &c)) return 0;
  return c;
}

bool IsWordChar(char32_t c) {
  const CharClass cls = unicode::Classify(c);
  return cls == kL || cls == kN || c == '_';
}

// Finds added tokens in text, leftmost-longest (as the Aho-Corasick
// automaton of `tokenizers`' AddedVocabulary).
class AddedTokenMatcher {
 public:
  void Add(const AddedToken* token) {
    if (token->content.empty()) return;
    by_first_byte_[static_cast<unsigned char>(token->content[0])].push_back(token);
    empty_ = false;
  }
  void Finish() {
    for (auto& bucket : by_first_byte_) {
      std::stable_sort(bucket.begin(), bucket.end(), [](const AddedToken* a, const AddedToken* b) {
        return a->content.size() > b->content.size();
      });
    }
  }
  bool empty() const { return empty_; }

  void Split(std::string_view text, std::vector<Segment>* out) const {
    out->clear();
    const size_t n = text.size();
    size_t start_offset = 0;
    size_t p = 0;
    while (p < n) {
      const AddedToken* match = nullptr;
      for (const AddedToken* token : by_first_byte_[static_cast<unsigned char>(text[p])]) {
        if (text.compare(p, token->content.size(), token->content) == 0) {
          match = token;
          break;
        }
      }
      if (match == nullptr) {
        ++p;
        continue;
      }
      size_t start = p;
      size_t stop = p + match->content.size();
      p = stop;
      if (match->single_word) {
        const bool start_ok = start == 0 || !IsWordChar(CharBefore(text, start));
        size_t at = stop;
        char32_t next = 0;
        const bool stop_ok =
            stop == n || !unicode::DecodeUtf8(text, &at, &next) || !IsWordChar(next);
        if (!start_ok || !stop_ok) continue;
      }
      if (match->lstrip) {
        while (start > start_offset) {
          const char32_t c = CharBefore(text, start);
          if (unicode::Classify(c) != kS) break;
          std::string utf8;
          unicode::AppendUtf8(c, &utf8);
          start -= utf8.size();
        }
      }
      if (match->rstrip) {
        while (stop < n) {
          size_t at = stop;
          char32_t c;
          if (!unicode::DecodeUtf8(text, &at, &c) || unicode::Classify(c) != kS) break;
          stop = at;
        }
        p = std::max(p, stop);
      }
      if (start_offset < start) out->push_back({start_offset, start, nullptr});
      out->push_back({start, stop, match});
      start_offset = stop;
    }
    if (start_offset < n) out->push_back({start_offset, n, nullptr});
  }

 private:
  std::array<std::vector<const AddedToken*>, 256> by_first_byte_;
  bool empty_ = true;
};

enum class Normalization { kNfc, kNfd };

struct Merge {
  uint32_t rank;
  int32_t new_id;
};

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

constexpr size_t kMaxCachedWordBytes = 64;
constexpr size_t kCacheCapacity = 1 << 17;

}  // namespace

// ------------------------------------------------------------------------

struct BpeTokenizer::State {
  std::string path;

  // Model.
  absl::flat_hash_map<std::string, int32_t> vocab;  // BPE vocab (byte-level spelling)
  absl::flat_hash_map<uint64_t, Merge> merges;
  std::array<int32_t, 256> byte_ids;  // vocab id of each byte's character, or -1
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  int32_t unk_id = -1;

  // Pipeline.
  std::vector<Normalization> normalizers;
  std::vector<PreTokenizerStep> steps;
  std::vector<AddedToken> added;
  AddedTokenMatcher raw_added;         // normalized: false
  AddedTokenMatcher normalized_added;  // normalized: true

  // Ids.
  int32_t vocab_size = 0;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  std::vector<std::string> id_to_token;
  std::vector<std::string> decoded;  // the bytes each id decodes to
  std::vector<uint8_t> has_token;
  std::vector<uint8_t> special;
  absl::flat_hash_map<std::string, int32_t> added_ids;  // added token -> id

  // The id of an added token or vocab entry, or -1.
  int32_t FindToken(std::string_view token) const {
    auto it = added_ids.find(Sv(token));
    if (it != added_ids.end()) return it->second;
    auto v = vocab.find(Sv(token));
    return v == vocab.end() ? -1 : v->second;
  }

  // Per-word cache: pre-token bytes -> ids.
  mutable std::mutex cache_mu;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache;

  void BpeWord(std::string_view bytes, std::vector<int32_t>* ids) const;
  std::vector<int32_t> ComputeBpe(std::string_view bytes) const;
  void PreTokenizeAndEncode(std::u32string chars, std::vector<int32_t>* ids) const;
  std::u32string ApplyNormalizers(std::u32string chars) const;
};

std::u32string BpeTokenizer::State::ApplyNormalizers(std::u32string chars) const {
  for (Normalization n : normalizers) {
    chars = n == Normalization::kNfc ? unicode::ToNfc(chars) : unicode::ToNfd(chars);
  }
  return chars;
}

std::vector<int32_t> BpeTokenizer::State::ComputeBpe(std::string_view bytes) const {
  const ByteAlphabet& alphabet = Alphabet();
  if (ignore_merges) {
    std::string mapped;
    mapped.reserve(bytes.size() * 2);
    for (unsigned char b : bytes) mapped += alphabet.byte_to_utf8[b];
    auto it = vocab.find(mapped);
    if (it != vocab.end()) return {it->second};
  }
  // Initial symbols: one per byte (one byte-level character each).
  std::vector<int32_t> symbols;
  symbols.reserve(bytes.size());
  bool last_was_unk = false;
  for (unsigned char b : bytes) {
    const int32_t id = byte_ids[b];
    if (id >= 0) {
      symbols.push_back(id);
      last_was_unk = false;
      continue;
    }
    if (byte_fallback) {
      // As `tokenizers`: the UTF-8 bytes of the (byte-level) character.
      std::vector<int32_t> fallback;
      for (unsigned char u : alphabet.byte_to_utf8[b]) {
        auto it = vocab.find(absl::StrFormat("<0x%02X>", u));
        if (it == vocab.end()) break;
        fallback.push_back(it->second);
      }
      if (fallback.size() == alphabet.byte_to_utf8[b].size()) {
        symbols.insert(symbols.end(), fallback.begin(), fallback.end());
        last_was_unk = false;
        continue;
      }
    }
    if (unk_id >= 0) {
      if (!(fuse_unk && last_was_unk)) symbols.push_back(unk_id);
      last_was_unk = true;
    }
    // Without unk_token the character is dropped, as in `tokenizers`.
  }
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return symbols;

  std::vector<int32_t> prev(n), next(n);
  std::vector<uint8_t> alive(n, 1);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push = [&](int32_t left) {
    const int32_t right = next[left];
    if (right < 0) return;
    auto it = merges.find(PairKey(symbols[left], symbols[right]));
    if (it != merges.end()) queue.push({it->second.rank, left, it->second.new_id});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    const int32_t pos = top.pos;
    if (!alive[pos]) continue;
    const int32_t right = next[pos];
    if (right < 0) continue;
    auto it = merges.find(PairKey(symbols[pos], symbols[right]));
    if (it == merges.end() || it->second.new_id != top.new_id) continue;
    symbols[pos] = top.new_id;
    alive[right] = 0;
    next[pos] = next[right];
    if (next[pos] >= 0) prev[next[pos]] = pos;
    if (prev[pos] >= 0) push(prev[pos]);
    push(pos);
  }
  std::vector<int32_t> out;
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(symbols[i]);
  return out;
}

void BpeTokenizer::State::BpeWord(std::string_view bytes, std::vector<int32_t>* ids) const {
  if (bytes.empty()) return;
  if (bytes.size() == 1 && byte_ids[static_cast<unsigned char>(bytes[0])] >= 0) {
    ids->push_back(byte_ids[static_cast<unsigned char>(bytes[0])]);
    return;
  }
  const bool cacheable = bytes.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = cache.find(Sv(bytes));
    if (it != cache.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> word = ComputeBpe(bytes);
  ids->insert(ids->end(), word.begin(), word.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu);
    if (cache.size() < kCacheCapacity) cache.emplace(bytes, std::move(word));
  }
}

void BpeTokenizer::State::PreTokenizeAndEncode(std::u32string chars,
                                               std::vector<int32_t>* ids) const {
  // The pieces are spans of one buffer, `chars`.
  std::vector<Span> pieces = {{0, chars.size(), false}};
  std::vector<Span> next, matches, splits;
  std::vector<CharClass> classes;
  bool classes_valid = false;
  for (const PreTokenizerStep& step : steps) {
    next.clear();
    if (step.kind == PreTokenizerStep::Kind::kPrefixSpace) {
      // Prepend a space to every piece that lacks one: rebuild the buffer.
      std::u32string spaced;
      spaced.reserve(chars.size() + pieces.size());
      for (const Span& piece : pieces) {
        const size_t begin = spaced.size();
        if (piece.end == piece.begin || chars[piece.begin] != ' ') spaced.push_back(' ');
        spaced.append(chars, piece.begin, piece.end - piece.begin);
        next.push_back({begin, spaced.size(), false});
      }
      chars.swap(spaced);
      classes_valid = false;
    } else {
      if (!classes_valid && step.pattern != Pattern::kLiteral) {
        classes.resize(chars.size());
        for (size_t k = 0; k < chars.size(); ++k) classes[k] = unicode::Classify(chars[k]);
        classes_valid = true;
      }
      for (const Span& piece : pieces) {
        ApplySplit(step, chars.data() + piece.begin,
                   classes_valid ? classes.data() + piece.begin : nullptr, piece.end - piece.begin,
                   piece.begin, &next, &matches, &splits);
      }
    }
    pieces.swap(next);
  }
  std::string bytes;
  for (const Span& piece : pieces) {
    bytes.clear();
    for (size_t k = piece.begin; k < piece.end; ++k) {
      const char32_t c = chars[k];
      if (c < 0x80) {
        bytes.push_back(static_cast<char>(c));
      } else {
        unicode::AppendUtf8(c, &bytes);
      }
    }
    BpeWord(bytes, ids);
  }
}

// ------------------------------------------------------------------------
// Loading.

namespace {

// Error helpers: every message starts "SOURCE: key 'KEY': ".
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  absl::Status Invalid(std::string_view key, std::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": key '", Sv(key), "': ", Sv(message)));
  }
  absl::Status Unsupported(std::string_view key, std::string_view message) const {
    return absl::UnimplementedError(absl::StrCat(source_, ": key '", Sv(key), "': ", Sv(message)));
  }

  absl::Status CheckType(const JsonValue& value, JsonValue::Type type, std::string_view key) const {
    if (value.type() == type) return absl::OkStatus();
    return Invalid(key, absl::StrCat("expected ", JsonValue::TypeName(type), ", got ",
                                     JsonValue::TypeName(value.type())));
  }

  absl::StatusOr<bool> GetBool(const JsonValue& object, std::string_view path,
                               std::string_view name, bool fallback) const {
    const JsonValue* v = object.Find(name);
    if (v == nullptr || v->is_null()) return fallback;
    RETURN_IF_ERROR(CheckType(*v, JsonValue::Type::kBool, Key(path, name)));
    return v->bool_value();
  }

  // A string, or nullopt when absent or null.
  absl::StatusOr<std::optional<std::string>> GetOptionalString(const JsonValue& object,
                                                               std::string_view path,
                                                               std::string_view name) const {
    const JsonValue* v = object.Find(name);
    if (v == nullptr || v->is_null()) return std::optional<std::string>();
    RETURN_IF_ERROR(CheckType(*v, JsonValue::Type::kString, Key(path, name)));
    return std::optional<std::string>(v->string_value());
  }

  absl::StatusOr<std::string> GetString(const JsonValue& object, std::string_view path,
                                        std::string_view name) const {
    const JsonValue* v = object.Find(name);
    if (v == nullptr) return Invalid(Key(path, name), "missing");
    RETURN_IF_ERROR(CheckType(*v, JsonValue::Type::kString, Key(path, name)));
    return v->string_value();
  }

  absl::StatusOr<int32_t> GetId(const JsonValue& value, std::string_view key) const {
    int64_t id;
    if (!value.GetInt64(&id) || id < 0 || id > INT32_MAX) {
      return Invalid(key, absl::StrCat("expected a non-negative integer id, got ",
                                       value.is_number() ? absl::StrCat(value.number_value())
                                                         : JsonValue::TypeName(value.type())));
    }
    return static_cast<int32_t>(id);
  }

  static std::string Key(std::string_view path, std::string_view name) {
    return path.empty() ? std::string(name) : absl::StrCat(Sv(path), ".", Sv(name));
  }

 private:
  std::string source_;
};

std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(c));
    } else {
      out.push_back(c);
    }
  }
  out += "'";
  return out;
}

absl::Status LoadModel(const Reader& r, const JsonValue& root, BpeTokenizer::State* s) {
  const JsonValue* model = root.Find("model");
  if (model == nullptr) return r.Invalid("model", "missing");
  RETURN_IF_ERROR(r.CheckType(*model, JsonValue::Type::kObject, "model"));
  ASSIGN_OR_RETURN(std::optional<std::string> type, r.GetOptionalString(*model, "model", "type"));
  if (type.has_value() && *type != "BPE") {
    return r.Unsupported("model.type",
                         absl::StrCat("model type ", Quote(*type), " is not supported (only BPE)"));
  }
  if (const JsonValue* dropout = model->Find("dropout");
      dropout != nullptr && !dropout->is_null() &&
      !(dropout->is_number() && dropout->number_value() == 0)) {
    return r.Unsupported("model.dropout", "BPE dropout is not supported");
  }
  for (const char* name : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    ASSIGN_OR_RETURN(std::optional<std::string> affix, r.GetOptionalString(*model, "model", name));
    if (affix.has_value() && !affix->empty()) {
      return r.Unsupported(Reader::Key("model", name),
                           absl::StrCat(Quote(*affix), " is not supported (only empty or null)"));
    }
  }
  ASSIGN_OR_RETURN(s->ignore_merges, r.GetBool(*model, "model", "ignore_merges", false));
  ASSIGN_OR_RETURN(s->byte_fallback, r.GetBool(*model, "model", "byte_fallback", false));
  ASSIGN_OR_RETURN(s->fuse_unk, r.GetBool(*model, "model", "fuse_unk", false));

  // vocab
  const JsonValue* vocab = model->Find("vocab");
  if (vocab == nullptr) return r.Invalid("model.vocab", "missing");
  RETURN_IF_ERROR(r.CheckType(*vocab, JsonValue::Type::kObject, "model.vocab"));
  s->vocab.reserve(vocab->object().size());
  for (const JsonValue::Member& member : vocab->object()) {
    int64_t id;
    if (!member.second.GetInt64(&id) || id < 0 || id > INT32_MAX) {
      return r.GetId(member.second, absl::StrCat("model.vocab[", Quote(member.first), "]"))
          .status();
    }
    if (!s->vocab.emplace(member.first, static_cast<int32_t>(id)).second) {
      return r.Invalid("model.vocab", absl::StrCat("duplicate token ", Quote(member.first)));
    }
  }

  // merges
  const JsonValue* merges = model->Find("merges");
  if (merges == nullptr) return r.Invalid("model.merges", "missing");
  RETURN_IF_ERROR(r.CheckType(*merges, JsonValue::Type::kArray, "model.merges"));
  s->merges.reserve(merges->array().size());
  std::string merged;
  for (size_t i = 0; i < merges->array().size(); ++i) {
    const JsonValue& m = merges->array()[i];
    std::string_view left, right;
    if (m.is_string()) {
      const std::string& text = m.string_value();
      const size_t space = text.find(' ');
      if (space == std::string::npos) {
        return r.Invalid(absl::StrCat("model.merges[", i, "]"),
                         absl::StrCat("expected \"LEFT RIGHT\", got ", Quote(text)));
      }
      left = std::string_view(text).substr(0, space);
      right = std::string_view(text).substr(space + 1);
    } else if (m.is_array() && m.array().size() == 2 && m.array()[0].is_string() &&
               m.array()[1].is_string()) {
      left = m.array()[0].string_value();
      right = m.array()[1].string_value();
    } else {
      return r.Invalid(absl::StrCat("model.merges[", i, "]"),
                       absl::StrCat("expected a string \"LEFT RIGHT\" or a pair [LEFT, RIGHT], "
                                    "got ",
                                    JsonValue::TypeName(m.type())));
    }
    merged.assign(left);
    merged.append(right);
    int32_t ids[3];
    const std::string_view parts[3] = {left, right, merged};
    for (int k = 0; k < 3; ++k) {
      auto it = s->vocab.find(Sv(parts[k]));
      if (it == s->vocab.end()) {
        return r.Invalid(absl::StrCat("model.merges[", i, "]"),
                         absl::StrCat("token ", Quote(parts[k]), " is not in model.vocab"));
      }
      ids[k] = it->second;
    }
    // A repeated pair keeps its last rank, as in `tokenizers`.
    s->merges[PairKey(ids[0], ids[1])] = Merge{static_cast<uint32_t>(i), ids[2]};
  }

  ASSIGN_OR_RETURN(std::optional<std::string> unk,
                   r.GetOptionalString(*model, "model", "unk_token"));
  if (unk.has_value()) {
    auto it = s->vocab.find(*unk);
    if (it == s->vocab.end()) {
      return r.Invalid("model.unk_token", absl::StrCat(Quote(*unk), " is not in model.vocab"));
    }
    s->unk_id = it->second;
  }
  const ByteAlphabet& alphabet = Alphabet();
  for (int b = 0; b < 256; ++b) {
    auto it = s->vocab.find(alphabet.byte_to_utf8[b]);
    s->byte_ids[b] = it == s->vocab.end() ? -1 : it->second;
  }
  return absl::OkStatus();
}

absl::Status LoadNormalizer(const Reader& r, const JsonValue& value, const std::string& key,
                            std::vector<Normalization>* out) {
  if (value.is_null()) return absl::OkStatus();
  RETURN_IF_ERROR(r.CheckType(value, JsonValue::Type::kObject, key));
  ASSIGN_OR_RETURN(std::string type, r.GetString(value, key, "type"));
  if (type == "NFC") {
    out->push_back(Normalization::kNfc);
  } else if (type == "NFD") {
    out->push_back(Normalization::kNfd);
  } else if (type == "Sequence") {
    const std::string list_key = Reader::Key(key, "normalizers");
    const JsonValue* list = value.Find("normalizers");
    if (list == nullptr) return r.Invalid(list_key, "missing");
    RETURN_IF_ERROR(r.CheckType(*list, JsonValue::Type::kArray, list_key));
    for (size_t i = 0; i < list->array().size(); ++i) {
      RETURN_IF_ERROR(
          LoadNormalizer(r, list->array()[i], absl::StrCat(list_key, "[", i, "]"), out));
    }
  } else {
    return r.Unsupported(
        Reader::Key(key, "type"),
        absl::StrCat("normalizer ", Quote(type), " is not supported (only NFC, NFD and Sequence)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Behavior> ParseBehavior(const Reader& r, const std::string& key,
                                       const std::string& name) {
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  return r.Invalid(key, absl::StrCat("unknown split behavior ", Quote(name)));
}

// Appends the steps of one pre-tokenizer; sets *byte_level for ByteLevel.
absl::Status LoadPreTokenizer(const Reader& r, const JsonValue& value, const std::string& key,
                              std::vector<PreTokenizerStep>* steps, bool* byte_level) {
  RETURN_IF_ERROR(r.CheckType(value, JsonValue::Type::kObject, key));
  ASSIGN_OR_RETURN(std::string type, r.GetString(value, key, "type"));
  if (*byte_level) {
    return r.Unsupported(key, "pre-tokenizers after ByteLevel are not supported");
  }
  if (type == "Sequence") {
    const std::string list_key = Reader::Key(key, "pretokenizers");
    const JsonValue* list = value.Find("pretokenizers");
    if (list == nullptr) return r.Invalid(list_key, "missing");
    RETURN_IF_ERROR(r.CheckType(*list, JsonValue::Type::kArray, list_key));
    for (size_t i = 0; i < list->array().size(); ++i) {
      RETURN_IF_ERROR(LoadPreTokenizer(r, list->array()[i], absl::StrCat(list_key, "[", i, "]"),
                                       steps, byte_level));
    }
    return absl::OkStatus();
  }
  if (type == "ByteLevel") {
    ASSIGN_OR_RETURN(bool add_prefix_space, r.GetBool(value, key, "add_prefix_space", true));
    ASSIGN_OR_RETURN(bool use_regex, r.GetBool(value, key, "use_regex", true));
    if (add_prefix_space) {
      PreTokenizerStep step;
      step.kind = PreTokenizerStep::Kind::kPrefixSpace;
      steps->push_back(step);
    }
    if (use_regex) {
      PreTokenizerStep step;
      step.pattern = Pattern::kGpt2;
      steps->push_back(step);
    }
    *byte_level = true;
    return absl::OkStatus();
  }
  if (type == "Split") {
    PreTokenizerStep step;
    const std::string pattern_key = Reader::Key(key, "pattern");
    const JsonValue* pattern = value.Find("pattern");
    if (pattern == nullptr) return r.Invalid(pattern_key, "missing");
    RETURN_IF_ERROR(r.CheckType(*pattern, JsonValue::Type::kObject, pattern_key));
    ASSIGN_OR_RETURN(std::optional<std::string> regex,
                     r.GetOptionalString(*pattern, pattern_key, "Regex"));
    ASSIGN_OR_RETURN(std::optional<std::string> literal,
                     r.GetOptionalString(*pattern, pattern_key, "String"));
    if (regex.has_value()) {
      if (*regex == kLlama3Regex) {
        step.pattern = Pattern::kLlama3;
      } else if (*regex == kQwen2Regex) {
        step.pattern = Pattern::kQwen2;
      } else if (*regex == kGpt2Regex) {
        step.pattern = Pattern::kGpt2;
      } else {
        return r.Unsupported(
            Reader::Key(pattern_key, "Regex"),
            absl::StrCat("regex ", Quote(*regex),
                         " is not supported: only the GPT-2, Llama-3 (cl100k) and Qwen2 "
                         "pre-tokenizer patterns are implemented"));
      }
    } else if (literal.has_value()) {
      step.pattern = Pattern::kLiteral;
      ASSIGN_OR_RETURN(step.literal, unicode::Utf8ToUtf32(*literal));
    } else {
      return r.Invalid(pattern_key, "expected {\"Regex\": ...} or {\"String\": ...}");
    }
    ASSIGN_OR_RETURN(std::string behavior, r.GetString(value, key, "behavior"));
    ASSIGN_OR_RETURN(step.behavior, ParseBehavior(r, Reader::Key(key, "behavior"), behavior));
    ASSIGN_OR_RETURN(step.invert, r.GetBool(value, key, "invert", false));
    steps->push_back(std::move(step));
    return absl::OkStatus();
  }
  return r.Unsupported(Reader::Key(key, "type"),
                       absl::StrCat("pre-tokenizer ", Quote(type),
                                    " is not supported (only ByteLevel, Split and Sequence)"));
}

absl::Status CheckDecoder(const Reader& r, const JsonValue& value, const std::string& key) {
  if (value.is_null()) return absl::OkStatus();
  RETURN_IF_ERROR(r.CheckType(value, JsonValue::Type::kObject, key));
  ASSIGN_OR_RETURN(std::string type, r.GetString(value, key, "type"));
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence") {
    const std::string list_key = Reader::Key(key, "decoders");
    const JsonValue* list = value.Find("decoders");
    if (list == nullptr) return r.Invalid(list_key, "missing");
    RETURN_IF_ERROR(r.CheckType(*list, JsonValue::Type::kArray, list_key));
    for (size_t i = 0; i < list->array().size(); ++i) {
      RETURN_IF_ERROR(CheckDecoder(r, list->array()[i], absl::StrCat(list_key, "[", i, "]")));
    }
    return absl::OkStatus();
  }
  return r.Unsupported(Reader::Key(key, "type"),
                       absl::StrCat("decoder ", Quote(type), " is not supported (only ByteLevel)"));
}

absl::Status LoadAddedTokens(const Reader& r, const JsonValue& root, BpeTokenizer::State* s) {
  const JsonValue* list = root.Find("added_tokens");
  if (list == nullptr || list->is_null()) return absl::OkStatus();
  RETURN_IF_ERROR(r.CheckType(*list, JsonValue::Type::kArray, "added_tokens"));
  s->added.reserve(list->array().size());
  for (size_t i = 0; i < list->array().size(); ++i) {
    const std::string key = absl::StrCat("added_tokens[", i, "]");
    const JsonValue& entry = list->array()[i];
    RETURN_IF_ERROR(r.CheckType(entry, JsonValue::Type::kObject, key));
    AddedToken token;
    const JsonValue* id = entry.Find("id");
    if (id == nullptr) return r.Invalid(Reader::Key(key, "id"), "missing");
    ASSIGN_OR_RETURN(token.id, r.GetId(*id, Reader::Key(key, "id")));
    ASSIGN_OR_RETURN(token.content, r.GetString(entry, key, "content"));
    if (token.content.empty()) return r.Invalid(Reader::Key(key, "content"), "empty token");
    ASSIGN_OR_RETURN(token.special, r.GetBool(entry, key, "special", false));
    ASSIGN_OR_RETURN(token.single_word, r.GetBool(entry, key, "single_word", false));
    ASSIGN_OR_RETURN(token.lstrip, r.GetBool(entry, key, "lstrip", false));
    ASSIGN_OR_RETURN(token.rstrip, r.GetBool(entry, key, "rstrip", false));
    ASSIGN_OR_RETURN(token.normalized, r.GetBool(entry, key, "normalized", !token.special));
    s->added.push_back(std::move(token));
  }
  for (const AddedToken& token : s->added) {
    (token.normalized && !s->normalizers.empty() ? s->normalized_added : s->raw_added).Add(&token);
  }
  s->raw_added.Finish();
  s->normalized_added.Finish();
  return absl::OkStatus();
}

// The id of a token named in tokenizer_config.json ("bos_token": "<s>" or
// {"content": "<s>", ...}); -1 for null. `found` tells whether the key is there.
absl::StatusOr<int32_t> ConfigTokenId(const Reader& r, const JsonValue& config,
                                      std::string_view name, const BpeTokenizer::State& s,
                                      bool* found) {
  const JsonValue* value = config.Find(name);
  *found = value != nullptr;
  if (value == nullptr || value->is_null()) return -1;
  std::string content;
  if (value->is_string()) {
    content = value->string_value();
  } else if (value->is_object()) {
    ASSIGN_OR_RETURN(content, r.GetString(*value, name, "content"));
  } else {
    return r.Invalid(name, absl::StrCat("expected a string, an object or null, got ",
                                        JsonValue::TypeName(value->type())));
  }
  const int32_t id = s.FindToken(content);
  if (id < 0) {
    return r.Invalid(name, absl::StrCat("token ", Quote(content), " is not in the tokenizer"));
  }
  return id;
}

// BOS and EOS from a post_processor: the special tokens of a
// TemplateProcessing "single" template before and after $A, or the cls/sep
// of BertProcessing/RobertaProcessing.
void SpecialIdsFromPostProcessor(const JsonValue& pp, const BpeTokenizer::State& s, int32_t* bos,
                                 int32_t* eos) {
  if (!pp.is_object()) return;
  const JsonValue* type = pp.Find("type");
  if (type == nullptr || !type->is_string()) return;
  const std::string& t = type->string_value();
  auto id_of = [&](const std::string& token) { return s.FindToken(token); };
  if (t == "Sequence") {
    const JsonValue* list = pp.Find("processors");
    if (list == nullptr || !list->is_array()) return;
    for (const JsonValue& p : list->array()) SpecialIdsFromPostProcessor(p, s, bos, eos);
  } else if (t == "TemplateProcessing") {
    const JsonValue* single = pp.Find("single");
    if (single == nullptr || !single->is_array()) return;
    bool seen_sequence = false;
    for (const JsonValue& item : single->array()) {
      if (item.Find("Sequence") != nullptr) {
        seen_sequence = true;
        continue;
      }
      const JsonValue* special = item.Find("SpecialToken");
      if (special == nullptr) continue;
      const JsonValue* name = special->Find("id");
      if (name == nullptr || !name->is_string()) continue;
      int32_t id = id_of(name->string_value());
      if (const JsonValue* table = pp.Find("special_tokens")) {
        if (const JsonValue* entry = table->Find(name->string_value())) {
          const JsonValue* ids = entry->Find("ids");
          int64_t value;
          if (ids != nullptr && ids->is_array() && ids->array().size() == 1 &&
              ids->array()[0].GetInt64(&value)) {
            id = static_cast<int32_t>(value);
          }
        }
      }
      if (id < 0) continue;
      if (!seen_sequence && *bos < 0) *bos = id;
      if (seen_sequence && *eos < 0) *eos = id;
    }
  } else if (t == "BertProcessing" || t == "RobertaProcessing") {
    for (auto [key, out] : {std::pair<const char*, int32_t*>{"cls", bos}, {"sep", eos}}) {
      const JsonValue* pair = pp.Find(key);
      int64_t value;
      if (pair != nullptr && pair->is_array() && pair->array().size() == 2 &&
          pair->array()[1].GetInt64(&value) && *out < 0) {
        *out = static_cast<int32_t>(value);
      }
    }
  }
}

absl::Status ResolveSpecialIds(const JsonValue& root, const JsonValue* config,
                               const Reader* config_reader, BpeTokenizer::State* s) {
  bool bos_set = false, eos_set = false;
  if (config != nullptr) {
    RETURN_IF_ERROR(config_reader->CheckType(*config, JsonValue::Type::kObject, "(top level)"));
    ASSIGN_OR_RETURN(s->bos_id, ConfigTokenId(*config_reader, *config, "bos_token", *s, &bos_set));
    ASSIGN_OR_RETURN(s->eos_id, ConfigTokenId(*config_reader, *config, "eos_token", *s, &eos_set));
  }
  int32_t bos = -1, eos = -1;
  if (const JsonValue* pp = root.Find("post_processor")) {
    SpecialIdsFromPostProcessor(*pp, *s, &bos, &eos);
  }
  auto first_present = [&](std::initializer_list<const char*> names) {
    for (const char* name : names) {
      const int32_t id = s->FindToken(name);
      if (id >= 0) return id;
    }
    return -1;
  };
  if (bos < 0) bos = first_present({"<|begin_of_text|>", "<s>", "<|startoftext|>", "<bos>"});
  if (eos < 0) {
    eos = first_present({"<|end_of_text|>", "</s>", "<|endoftext|>", "<eos>"});
  }
  if (!bos_set) s->bos_id = bos;
  if (!eos_set) s->eos_id = eos;
  return absl::OkStatus();
}

absl::Status BuildIdTables(const Reader& r, BpeTokenizer::State* s) {
  int64_t max_id = -1;
  for (const auto& [token, id] : s->vocab) max_id = std::max<int64_t>(max_id, id);
  for (const AddedToken& token : s->added) max_id = std::max<int64_t>(max_id, token.id);
  if (max_id < 0) return r.Invalid("model.vocab", "the vocabulary is empty");
  if (max_id >= (int64_t{1} << 30)) {
    return r.Invalid("model.vocab", absl::StrCat("id ", max_id, " is too large"));
  }
  // Ids are dense in every real tokenizer (added tokens may leave small gaps);
  // sparse ones would size the id tables by the largest id, not by the file.
  const int64_t tokens = static_cast<int64_t>(s->vocab.size() + s->added.size());
  if (max_id >= 2 * tokens + 1024) {
    return r.Invalid("model.vocab", absl::StrCat("ids are sparse: the largest is ", max_id, " for ", tokens,
                                                 " tokens (expected ids 0..N-1, with small gaps at most)"));
  }
  s->vocab_size = static_cast<int32_t>(max_id + 1);
  s->id_to_token.assign(s->vocab_size, std::string());
  s->has_token.assign(s->vocab_size, 0);
  s->special.assign(s->vocab_size, 0);
  for (const auto& [token, id] : s->vocab) {
    s->id_to_token[id] = token;
    s->has_token[id] = 1;
  }
  for (const AddedToken& token : s->added) {
    s->id_to_token[token.id] = token.content;
    s->has_token[token.id] = 1;
    s->special[token.id] = token.special;
    s->added_ids[token.content] = token.id;
  }
  // What each id decodes to (the ByteLevel decoder): the bytes its characters
  // stand for, or the token's own text if one is not a byte-level character.
  const ByteAlphabet& alphabet = Alphabet();
  s->decoded.assign(s->vocab_size, std::string());
  for (int32_t id = 0; id < s->vocab_size; ++id) {
    const std::string& token = s->id_to_token[id];
    std::string bytes;
    size_t pos = 0;
    bool all_bytes = true;
    while (pos < token.size()) {
      char32_t c;
      if (!unicode::DecodeUtf8(token, &pos, &c)) {
        all_bytes = false;
        break;
      }
      if (c >= alphabet.char_to_byte.size() || alphabet.char_to_byte[c] < 0) {
        all_bytes = false;
        break;
      }
      bytes.push_back(static_cast<char>(alphabet.char_to_byte[c]));
    }
    s->decoded[id] = all_bytes ? std::move(bytes) : token;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::string text;
  if (std::fseek(file, 0, SEEK_END) == 0) {
    const long size = std::ftell(file);
    if (size > 0) text.reserve(static_cast<size_t>(size));
    std::fseek(file, 0, SEEK_SET);
  }
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return absl::DataLossError(absl::StrCat("error reading '", path, "'"));
  return text;
}

}  // namespace

// ------------------------------------------------------------------------

BpeTokenizer::BpeTokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
BpeTokenizer::~BpeTokenizer() = default;

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Load(const std::string& path) {
  std::error_code error;
  std::string file = path;
  if (fs::is_directory(path, error)) file = (fs::path(path) / "tokenizer.json").string();
  if (!fs::is_regular_file(file, error)) {
    return absl::NotFoundError(absl::StrCat("tokenizer.json not found: '", file, "'"));
  }
  ASSIGN_OR_RETURN(std::string json, ReadFileToString(file));
  const fs::path config_path = fs::path(file).parent_path() / "tokenizer_config.json";
  std::string config;
  if (fs::is_regular_file(config_path, error)) {
    ASSIGN_OR_RETURN(config, ReadFileToString(config_path.string()));
  }
  return FromJson(json, file, config);
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromJson(std::string_view json,
                                                                     const std::string& source,
                                                                     std::string_view config_json) {
  ASSIGN_OR_RETURN(JsonValue root, ParseJson(json, source));
  const Reader r(source);
  RETURN_IF_ERROR(r.CheckType(root, JsonValue::Type::kObject, "(top level)"));
  auto state = std::make_unique<State>();
  state->path = source;
  RETURN_IF_ERROR(LoadModel(r, root, state.get()));
  if (const JsonValue* normalizer = root.Find("normalizer")) {
    RETURN_IF_ERROR(LoadNormalizer(r, *normalizer, "normalizer", &state->normalizers));
  }
  bool byte_level = false;
  if (const JsonValue* pre = root.Find("pre_tokenizer"); pre != nullptr && !pre->is_null()) {
    RETURN_IF_ERROR(LoadPreTokenizer(r, *pre, "pre_tokenizer", &state->steps, &byte_level));
  }
  if (!byte_level) {
    return r.Unsupported("pre_tokenizer",
                         "only byte-level BPE is supported: the pre_tokenizer must be ByteLevel "
                         "or a Sequence ending with ByteLevel");
  }
  if (const JsonValue* decoder = root.Find("decoder")) {
    RETURN_IF_ERROR(CheckDecoder(r, *decoder, "decoder"));
  }
  RETURN_IF_ERROR(LoadAddedTokens(r, root, state.get()));
  RETURN_IF_ERROR(BuildIdTables(r, state.get()));

  std::optional<JsonValue> config;
  std::string config_source = (fs::path(source).parent_path() / "tokenizer_config.json").string();
  const Reader config_reader(config_source);
  if (!config_json.empty()) {
    ASSIGN_OR_RETURN(config, ParseJson(config_json, config_source));
  }
  RETURN_IF_ERROR(ResolveSpecialIds(root, config.has_value() ? &*config : nullptr, &config_reader,
                                    state.get()));
  return std::unique_ptr<BpeTokenizer>(new BpeTokenizer(std::move(state)));
}

absl::StatusOr<std::vector<int32_t>> BpeTokenizer::Encode(std::string_view text) const {
  const State& s = *state_;
  // Validate UTF-8 up front (fast path for ASCII).
  for (size_t pos = 0; pos < text.size();) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    char32_t c;
    const size_t at = pos;
    if (!unicode::DecodeUtf8(text, &pos, &c)) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.path, ": cannot encode invalid UTF-8 (byte ", at, " of the text)"));
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  std::vector<Segment> segments, inner;
  s.raw_added.Split(text, &segments);
  for (const Segment& segment : segments) {
    if (segment.token != nullptr) {
      ids.push_back(segment.token->id);
      continue;
    }
    const std::string_view part = text.substr(segment.begin, segment.end - segment.begin);
    ASSIGN_OR_RETURN(std::u32string chars, unicode::Utf8ToUtf32(part));
    if (s.normalizers.empty()) {
      s.PreTokenizeAndEncode(std::move(chars), &ids);
      continue;
    }
    chars = s.ApplyNormalizers(std::move(chars));
    if (s.normalized_added.empty()) {
      s.PreTokenizeAndEncode(std::move(chars), &ids);
      continue;
    }
    const std::string normalized = unicode::Utf32ToUtf8(chars);
    s.normalized_added.Split(normalized, &inner);
    for (const Segment& sub : inner) {
      if (sub.token != nullptr) {
        ids.push_back(sub.token->id);
        continue;
      }
      ASSIGN_OR_RETURN(std::u32string sub_chars,
                       unicode::Utf8ToUtf32(
                           std::string_view(normalized).substr(sub.begin, sub.end - sub.begin)));
      s.PreTokenizeAndEncode(std::move(sub_chars), &ids);
    }
  }
  return ids;
}

absl::StatusOr<std::string> BpeTokenizer::DecodeImpl(absl::Span<const int32_t> ids,
                                                     bool skip_special) const {
  const State& s = *state_;
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || id >= s.vocab_size || !s.has_token[id]) {
      return absl::InvalidArgumentError(absl::StrCat(
          s.path, ": cannot decode id ", id, ": not a token id (vocab_size ", s.vocab_size, ")"));
    }
    if (skip_special && s.special[id]) continue;
    bytes += s.decoded[id];
  }
  return unicode::Utf8Lossy(bytes);
}

absl::StatusOr<std::string> BpeTokenizer::Decode(absl::Span<const int32_t> ids) const {
  return DecodeImpl(ids, /*skip_special=*/true);
}

absl::StatusOr<std::string> BpeTokenizer::DecodeWithSpecialTokens(
    absl::Span<const int32_t> ids) const {
  return DecodeImpl(ids, /*skip_special=*/false);
}

int32_t BpeTokenizer::vocab_size() const { return state_->vocab_size; }
int32_t BpeTokenizer::bos_id() const { return state_->bos_id; }
int32_t BpeTokenizer::eos_id() const { return state_->eos_id; }
const std::string& BpeTokenizer::path() const { return state_->path; }

int32_t BpeTokenizer::TokenToId(std::string_view token) const { return state_->FindToken(token); }

absl::StatusOr<std::string> BpeTokenizer::IdToToken(int32_t id) const {
  if (id < 0 || id >= state_->vocab_size || !state_->has_token[id]) {
    return absl::InvalidArgumentError(
        absl::StrCat(state_->path, ": id ", id, " is not a token id"));
  }
  return state_->id_to_token[id];
}

bool BpeTokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && id < state_->vocab_size && state_->special[id];
}

absl::StatusOr<std::string> BpeTokenizer::Normalize(std::string_view text) const {
  ASSIGN_OR_RETURN(std::u32string chars, unicode::Utf8ToUtf32(text));
  return unicode::Utf32ToUtf8(state_->ApplyNormalizers(std::move(chars)));
}

}  // namespace speclab
