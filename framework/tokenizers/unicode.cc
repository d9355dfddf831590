#include "framework/tokenizers/unicode.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace speclab {
namespace unicode {
namespace {

using unicode_internal::ClassRange;

constexpr char32_t kReplacement = 0xFFFD;
constexpr uint8_t kClassMask = 0x3;
constexpr uint8_t kNfcCheckBit = 0x4;    // combining mark or NFC_QC != Yes
constexpr uint8_t kDecomposesBit = 0x8;  // has a canonical decomposition
constexpr uint8_t kComposesBit = 0x10;   // is the second of a primary composite

// Hangul syllable algorithm constants (Unicode Standard, section 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28;
constexpr int kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

// The value of the range holding `c`, or 0.
uint8_t LookUpRange(const ClassRange* ranges, int size, char32_t c) {
  const ClassRange* end = ranges + size;
  const ClassRange* it =
      std::upper_bound(ranges, end, c, [](char32_t v, const ClassRange& r) { return v < r.first; });
  if (it == ranges) return 0;
  --it;
  return c <= it->last ? it->value : 0;
}

const unicode_internal::Decomposition* FindDecomposition(char32_t c) {
  const auto* begin = unicode_internal::kDecompositions;
  const auto* end = begin + unicode_internal::kDecompositionsSize;
  const auto* it = std::lower_bound(
      begin, end, c,
      [](const unicode_internal::Decomposition& d, char32_t v) { return d.code_point < v; });
  return it != end && it->code_point == c ? it : nullptr;
}

bool IsHangulSyllable(char32_t c) { return c >= kSBase && c < kSBase + kSCount; }
bool IsHangulVowelOrTrail(char32_t c) {
  return (c >= kVBase && c < kVBase + kVCount) || (c > kTBase && c < kTBase + kTCount);
}

uint8_t SlowFlags(char32_t c) {
  uint8_t flags =
      LookUpRange(unicode_internal::kCharClassRanges, unicode_internal::kCharClassRangesSize, c);
  if (LookUpRange(unicode_internal::kCombiningClasses, unicode_internal::kCombiningClassesSize,
                  c) != 0 ||
      LookUpRange(unicode_internal::kNfcQcNotYes, unicode_internal::kNfcQcNotYesSize, c) != 0) {
    flags |= kNfcCheckBit;
  }
  if (FindDecomposition(c) != nullptr || IsHangulSyllable(c)) flags |= kDecomposesBit;
  // The second characters of compositions outside the BMP, sorted.
  static const std::vector<char32_t>* seconds = [] {
    auto* v = new std::vector<char32_t>();
    for (int i = 0; i < unicode_internal::kCompositionsSize; ++i) {
      if (unicode_internal::kCompositions[i].second >= 0x10000) {
        v->push_back(unicode_internal::kCompositions[i].second);
      }
    }
    std::sort(v->begin(), v->end());
    return v;
  }();
  if (std::binary_search(seconds->begin(), seconds->end(), c) || IsHangulVowelOrTrail(c)) {
    flags |= kComposesBit;
  }
  return flags;
}

// Flags and combining classes of the Basic Multilingual Plane, built once
// from the range tables.
struct BmpTables {
  std::array<uint8_t, 0x10000> flags{};
  std::array<uint8_t, 0x10000> ccc{};
};

const BmpTables& Bmp() {
  static const BmpTables* tables = [] {
    auto* t = new BmpTables();
    auto fill = [](const ClassRange* ranges, int size, auto&& apply) {
      for (int i = 0; i < size; ++i) {
        if (ranges[i].first >= 0x10000) break;
        const uint32_t last = std::min<uint32_t>(ranges[i].last, 0xFFFF);
        for (uint32_t c = ranges[i].first; c <= last; ++c) apply(c, ranges[i].value);
      }
    };
    fill(unicode_internal::kCharClassRanges, unicode_internal::kCharClassRangesSize,
         [t](uint32_t c, uint8_t v) { t->flags[c] |= v; });
    fill(unicode_internal::kCombiningClasses, unicode_internal::kCombiningClassesSize,
         [t](uint32_t c, uint8_t v) {
           t->ccc[c] = v;
           t->flags[c] |= kNfcCheckBit;
         });
    fill(unicode_internal::kNfcQcNotYes, unicode_internal::kNfcQcNotYesSize,
         [t](uint32_t c, uint8_t) { t->flags[c] |= kNfcCheckBit; });
    for (int i = 0; i < unicode_internal::kDecompositionsSize; ++i) {
      const uint32_t c = unicode_internal::kDecompositions[i].code_point;
      if (c < 0x10000) t->flags[c] |= kDecomposesBit;
    }
    for (int i = 0; i < unicode_internal::kCompositionsSize; ++i) {
      const uint32_t c = unicode_internal::kCompositions[i].second;
      if (c < 0x10000) t->flags[c] |= kComposesBit;
    }
    for (char32_t c = kSBase; c < kSBase + kSCount; ++c) t->flags[c] |= kDecomposesBit;
    for (char32_t c = kVBase; c < 0x11C3; ++c) {
      if (IsHangulVowelOrTrail(c)) t->flags[c] |= kComposesBit;
    }
    return t;
  }();
  return *tables;
}

uint8_t Flags(char32_t c) { return c < 0x10000 ? Bmp().flags[c] : SlowFlags(c); }

bool IsContinuation(unsigned char b) { return (b & 0xC0) == 0x80; }

// The allowed range of the second byte after lead byte `b0`, per Table 3-7
// of the Unicode Standard; returns the sequence length (0: not a lead byte).
int LeadInfo(unsigned char b0, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (b0 < 0x80) return 1;
  if (b0 < 0xC2) return 0;
  if (b0 < 0xE0) return 2;
  if (b0 < 0xF0) {
    if (b0 == 0xE0) *lo = 0xA0;
    if (b0 == 0xED) *hi = 0x9F;
    return 3;
  }
  if (b0 < 0xF5) {
    if (b0 == 0xF0) *lo = 0x90;
    if (b0 == 0xF4) *hi = 0x8F;
    return 4;
  }
  return 0;
}

// Length of the well-formed sequence at text[pos] or, if there is none, the
// negated length (>= 1) of its maximal ill-formed subpart.
int SequenceLength(std::string_view text, size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const size_t left = text.size() - pos;
  unsigned char lo, hi;
  const int length = LeadInfo(p[0], &lo, &hi);
  if (length == 0) return -1;
  for (int i = 1; i < length; ++i) {
    if (static_cast<size_t>(i) >= left) return -i;
    const bool ok = i == 1 ? (p[1] >= lo && p[1] <= hi) : IsContinuation(p[i]);
    if (!ok) return -i;
  }
  return length;
}

char32_t DecodeKnownGood(const unsigned char* p, int length) {
  switch (length) {
    case 1:
      return p[0];
    case 2:
      return (char32_t{p[0] & 0x1Fu} << 6) | (p[1] & 0x3Fu);
    case 3:
      return (char32_t{p[0] & 0x0Fu} << 12) | (char32_t{p[1] & 0x3Fu} << 6) | (p[2] & 0x3Fu);
    default:
      return (char32_t{p[0] & 0x07u} << 18) | (char32_t{p[1] & 0x3Fu} << 12) |
             (char32_t{p[2] & 0x3Fu} << 6) | (p[3] & 0x3Fu);
  }
}

void DecomposeInto(char32_t c, std::u32string* out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    const int s = static_cast<int>(c - kSBase);
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  if (c < 0xC0 || (Flags(c) & kDecomposesBit) == 0) {
    out->push_back(c);
    return;
  }
  const unicode_internal::Decomposition* d = FindDecomposition(c);
  if (d == nullptr) {
    out->push_back(c);
    return;
  }
  DecomposeInto(d->first, out);
  if (d->second != 0) DecomposeInto(d->second, out);
}

// The primary composite of (first, second), or 0.
char32_t Compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase &&
      second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 &&
      second > kTBase && second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  const auto* begin = unicode_internal::kCompositions;
  const auto* end = begin + unicode_internal::kCompositionsSize;
  const auto* it = std::lower_bound(
      begin, end, std::make_pair(first, second),
      [](const unicode_internal::Composition& c, const std::pair<char32_t, char32_t>& v) {
        return c.first < v.first || (c.first == v.first && c.second < v.second);
      });
  return it != end && it->first == first && it->second == second ? it->composite : 0;
}

}  // namespace

CharClass Classify(char32_t c) {
  if (c < 0x10000) return static_cast<CharClass>(Bmp().flags[c] & kClassMask);
  return static_cast<CharClass>(
      LookUpRange(unicode_internal::kCharClassRanges, unicode_internal::kCharClassRangesSize, c));
}

int CombiningClass(char32_t c) {
  if (c < 0x300) return 0;
  if (c < 0x10000) return Bmp().ccc[c];
  return LookUpRange(unicode_internal::kCombiningClasses, unicode_internal::kCombiningClassesSize,
                     c);
}

bool DecodeUtf8(std::string_view text, size_t* pos, char32_t* c) {
  if (*pos >= text.size()) return false;
  const int length = SequenceLength(text, *pos);
  if (length <= 0) return false;
  *c = DecodeKnownGood(reinterpret_cast<const unsigned char*>(text.data()) + *pos, length);
  *pos += length;
  return true;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

absl::StatusOr<std::u32string> Utf8ToUtf32(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const unsigned char b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {
      out.push_back(b);
      ++pos;
      continue;
    }
    char32_t c;
    if (!DecodeUtf8(text, &pos, &c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid UTF-8 at byte ", pos, " (0x", absl::Hex(b, absl::kZeroPad2), ")"));
    }
    out.push_back(c);
  }
  return out;
}

std::string Utf32ToUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) AppendUtf8(c, &out);
  return out;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    const int length = SequenceLength(bytes, pos);
    if (length > 0) {
      out.append(bytes.data() + pos, length);
      pos += length;
    } else {
      AppendUtf8(kReplacement, &out);
      pos += -length;
    }
  }
  return out;
}

bool IsNfcQuick(std::u32string_view text) {
  for (char32_t c : text) {
    if (c >= 0x300 && (Flags(c) & kNfcCheckBit) != 0) return false;
  }
  return true;
}

std::u32string ToNfd(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size() + 8);
  for (char32_t c : text) DecomposeInto(c, &out);
  // Canonical ordering: stable sort of every run of non-starters by class.
  for (size_t i = 1; i < out.size(); ++i) {
    const int ccc = CombiningClass(out[i]);
    if (ccc == 0) continue;
    size_t j = i;
    const char32_t c = out[i];
    while (j > 0 && CombiningClass(out[j - 1]) > ccc) {
      out[j] = out[j - 1];
      --j;
    }
    out[j] = c;
  }
  return out;
}

std::u32string ToNfc(std::u32string_view text) {
  if (IsNfcQuick(text)) return std::u32string(text);
  std::u32string s = ToNfd(text);
  if (s.empty()) return s;
  // Canonical composition (UAX #15): each character either combines with the
  // last starter, if nothing between them blocks it, or is kept.
  size_t starter = 0;
  int last_class = CombiningClass(s[0]);
  if (last_class != 0) last_class = 256;  // no starter yet: block everything
  size_t kept = 1;
  for (size_t i = 1; i < s.size(); ++i) {
    const char32_t c = s[i];
    const int ccc = CombiningClass(c);
    const char32_t composite =
        last_class == 256 || (Flags(c) & kComposesBit) == 0 ? 0 : Compose(s[starter], c);
    if (composite != 0 && (last_class < ccc || last_class == 0)) {
      s[starter] = composite;
      continue;
    }
    if (ccc == 0) starter = kept;
    last_class = ccc;
    s[kept++] = c;
  }
  s.resize(kept);
  return s;
}

}  // namespace unicode
}  // namespace speclab
