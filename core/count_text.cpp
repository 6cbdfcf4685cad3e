#include "core/count_text.h"

#include <charconv>

namespace partrain {

std::optional<int64_t> parse_count(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || text.front() == '-' || ec != std::errc() ||
      end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

}  // namespace partrain
