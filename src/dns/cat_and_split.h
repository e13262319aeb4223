// String concatenation and splitting for poise::dns over std::string_view
// (Debian's Abseil has its own absl::string_view, which absl::StrCat wants).
#ifndef POISE_DNS_CAT_AND_SPLIT_H_
#define POISE_DNS_CAT_AND_SPLIT_H_

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace poise::dns::internal {

inline void AppendPiece(std::string* out, std::string_view piece) {
  out->append(piece);
}

template <typename T,
          std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, char> &&
                               !std::is_same_v<T, bool>,
                           int> = 0>
void AppendPiece(std::string* out, T value) {
  out->append(std::to_string(value));
}

template <typename... Pieces>
void Append(std::string* out, const Pieces&... pieces) {
  (AppendPiece(out, pieces), ...);
}

template <typename... Pieces>
std::string Cat(const Pieces&... pieces) {
  std::string out;
  Append(&out, pieces...);
  return out;
}

// "a,,b" -> {"a", "", "b"}; "" -> {""}.
inline std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    if (end == std::string_view::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace poise::dns::internal

#endif  // POISE_DNS_CAT_AND_SPLIT_H_
