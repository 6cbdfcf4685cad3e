// ASCII's letters and digits, whatever the process's locale: protocol text (HTTP methods and
// headers), flag values and environment names are ASCII, and <cctype> follows LC_CTYPE, which
// the dashboard sets from the user's environment for ncurses' wide characters. Under tr_TR,
// std::tolower('I') is not 'i' (Turkish has a dotted and a dotless i), and a Latin-9 locale
// counts bytes above 127 as letters.
#pragma once

#include <string>
#include <string_view>

namespace partrain {

constexpr bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }
constexpr bool is_ascii_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
constexpr bool is_ascii_alnum(char c) { return is_ascii_alpha(c) || is_ascii_digit(c); }
constexpr char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
constexpr char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }

inline std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = ascii_lower(c);
  return out;
}

}  // namespace partrain
