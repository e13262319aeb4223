// Well-formed UTF-8 for the text the policies write (Prometheus label values,
// explanation JSON): keys, labels and identities are bytes, not text, and
// either format requires UTF-8.
#ifndef POISE_SRC_ROUTER_UTF8_TEXT_H_
#define POISE_SRC_ROUTER_UTF8_TEXT_H_

#include <cstddef>
#include <string_view>

namespace poise::router {

// U+FFFD REPLACEMENT CHARACTER, as UTF-8.
inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// The length of the well-formed UTF-8 sequence that `text` starts with
// (RFC 3629, the Unicode Standard's table 3-7: no overlong forms, no
// surrogates, nothing past U+10FFFF); 0 when `text` is empty or starts with
// a byte no such sequence covers.
size_t Utf8SequenceLength(std::string_view text);

// Whether all of `text` is well-formed UTF-8.
bool IsUtf8(std::string_view text);

// Calls `write(piece)` for each character of `text` in order: a well-formed
// sequence as it is, and kReplacementCharacter for each byte that is not
// part of one. The pieces joined are `text` itself exactly when IsUtf8(text).
template <typename Write>
void ForEachUtf8Character(std::string_view text, Write&& write) {
  while (!text.empty()) {
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) {
      write(kReplacementCharacter);
      text.remove_prefix(1);
    } else {
      write(text.substr(0, length));
      text.remove_prefix(length);
    }
  }
}

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_UTF8_TEXT_H_
