// See normalizer.h. Each step mirrors the HuggingFace normalizer of the same name:
// - StripAccents drops every General_Category=Mark code point (Mn, Mc and Me), as the
//   library's is_combining_mark does, not only nonspacing marks.
// - Lowercase maps each code point on its own (Rust's char::to_lowercase, full mappings,
//   no context), so there is no final-sigma rule; ICU is called one code point at a time.
// - The regex /^ $/ can only match a whole string of one space: every newline, the only
//   line terminator of the library's regex engine, was replaced by the step before.
// - Strip removes White_Space code points at both ends (Rust's char::is_whitespace).
#include "model/engram/normalizer.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>

#include <vector>

namespace di::engram {
namespace {

constexpr UChar32 kSentinel = 0xE000;

Status icu_error(const char* step, UErrorCode code) {
  return internal_error(std::string("engram normalizer: ICU ") + step +
                        " failed: " + u_errorName(code));
}

Expected<icu::UnicodeString> normalize_with(const icu::Normalizer2* (*get)(UErrorCode&),
                                            const char* name,
                                            const icu::UnicodeString& in) {
  UErrorCode code = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = get(code);
  if (U_FAILURE(code) || normalizer == nullptr) return icu_error(name, code);
  icu::UnicodeString out = normalizer->normalize(in, code);
  if (U_FAILURE(code)) return icu_error(name, code);
  return out;
}

icu::UnicodeString strip_marks(const icu::UnicodeString& in) {
  icu::UnicodeString out;
  for (int32_t i = 0; i < in.length(); i = in.moveIndex32(i, 1)) {
    const UChar32 c = in.char32At(i);
    if ((U_GET_GC_MASK(c) & U_GC_M_MASK) == 0) out.append(c);
  }
  return out;
}

Expected<icu::UnicodeString> lowercase_per_code_point(const icu::UnicodeString& in) {
  icu::UnicodeString out;
  UChar buffer[16];
  for (int32_t i = 0; i < in.length(); i = in.moveIndex32(i, 1)) {
    const UChar32 c = in.char32At(i);
    UChar src[2];
    int32_t src_len = 0;
    UBool error = false;
    U16_APPEND(src, src_len, 2, c, error);
    if (error) return internal_error("engram normalizer: bad code point");
    UErrorCode code = U_ZERO_ERROR;
    // "" is ICU's root locale: no language-specific (Turkish, Lithuanian) rules.
    const int32_t n = u_strToLower(buffer, 16, src, src_len, "", &code);
    if (U_FAILURE(code)) return icu_error("lowercase", code);
    out.append(buffer, 0, n);
  }
  return out;
}

bool is_collapsible_space(UChar c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

icu::UnicodeString collapse_spaces(const icu::UnicodeString& in) {
  icu::UnicodeString out;
  for (int32_t i = 0; i < in.length();) {
    if (is_collapsible_space(in.charAt(i))) {
      while (i < in.length() && is_collapsible_space(in.charAt(i))) ++i;
      out.append(static_cast<UChar>(' '));
    } else {
      out.append(in.charAt(i));
      ++i;
    }
  }
  return out;
}

icu::UnicodeString strip_white_space(const icu::UnicodeString& in) {
  int32_t begin = 0;
  int32_t end = in.length();
  while (begin < end && u_isUWhiteSpace(in.char32At(begin))) begin = in.moveIndex32(begin, 1);
  while (end > begin) {
    const int32_t prev = in.moveIndex32(end, -1);
    if (!u_isUWhiteSpace(in.char32At(prev))) break;
    end = prev;
  }
  return icu::UnicodeString(in, begin, end - begin);
}

bool is_well_formed_utf8(std::string_view s) {
  int32_t i = 0;
  const int32_t n = static_cast<int32_t>(s.size());
  if (static_cast<std::size_t>(n) != s.size()) return false;
  while (i < n) {
    UChar32 c = 0;
    U8_NEXT(reinterpret_cast<const uint8_t*>(s.data()), i, n, c);
    if (c < 0) return false;
  }
  return true;
}

}  // namespace

Expected<std::string> engram_normalize(std::string_view utf8) {
  if (!is_well_formed_utf8(utf8)) return invalid_argument("engram normalizer: ill-formed UTF-8");
  const icu::UnicodeString input = icu::UnicodeString::fromUTF8(
      icu::StringPiece(utf8.data(), static_cast<int32_t>(utf8.size())));
  DI_ASSIGN_OR_RETURN(icu::UnicodeString s,
                      normalize_with(&icu::Normalizer2::getNFKCInstance, "NFKC", input));
  DI_ASSIGN_OR_RETURN(s, normalize_with(&icu::Normalizer2::getNFDInstance, "NFD", s));
  s = strip_marks(s);
  DI_ASSIGN_OR_RETURN(s, lowercase_per_code_point(s));
  s = collapse_spaces(s);
  if (s == icu::UnicodeString(static_cast<UChar>(' '))) s = icu::UnicodeString(kSentinel);
  s = strip_white_space(s);
  s.findAndReplace(icu::UnicodeString(kSentinel), icu::UnicodeString(static_cast<UChar>(' ')));
  std::string out;
  s.toUTF8String(out);
  return out;
}

}  // namespace di::engram
