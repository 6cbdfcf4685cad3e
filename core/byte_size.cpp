#include "core/byte_size.h"

#include <charconv>
#include <cmath>

namespace partrain {

StatusOr<uint64_t> parse_byte_size(std::string_view text) {
  double number = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (ec != std::errc() || text.empty() || number < 0 || !std::isfinite(number)) {
    return invalid_argument("'{}' is not a byte size: write a number with an optional K, M or G "
                            "suffix (binary: 1K = 1024 bytes), e.g. 8, 64K, 128M",
                            text);
  }
  std::string_view suffix(end, static_cast<size_t>(text.data() + text.size() - end));
  double scale = 1;
  if (suffix.empty() || suffix == "B" || suffix == "b") scale = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB" || suffix == "KB") scale = 1024.0;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB" || suffix == "MB") scale = 1048576.0;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB" || suffix == "GB") scale = 1073741824.0;
  else return invalid_argument("'{}': unknown size suffix '{}' (use K, M or G)", text, suffix);
  double bytes = number * scale;
  if (bytes > 1.8e19) return invalid_argument("'{}': size too large", text);
  return static_cast<uint64_t>(std::llround(bytes));
}

std::string format_bytes(uint64_t bytes) {
  auto value = static_cast<double>(bytes);
  if (value >= 1073741824.0) return fmt::format("{:.2f} GiB", value / 1073741824.0);
  if (value >= 1048576.0) return fmt::format("{:.2f} MiB", value / 1048576.0);
  if (value >= 1024.0) return fmt::format("{:.2f} KiB", value / 1024.0);
  return fmt::format("{} B", bytes);
}

}  // namespace partrain
