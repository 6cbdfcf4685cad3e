#include "core/number_format.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace partrain {

std::string format_decimal(double value, int decimals) {
  if (value == 0 || !std::isfinite(value)) return fmt::format("{}", value == 0 ? 0.0 : value);
  // What the column's decimals would show, read back: zero means the value would vanish.
  const std::string fixed = fmt::format("{:.{}f}", value, decimals);
  if (std::stod(fixed) != 0) return fixed;
  return fmt::format("{:.2g}", value);
}

std::string format_percent(double fraction, int decimals) {
  return format_decimal(100 * fraction, decimals) + "%";
}

std::string format_bandwidth(double bytes_per_second) {
  if (bytes_per_second == 0 || !std::isfinite(bytes_per_second)) {
    return fmt::format("{} B/s", bytes_per_second == 0 ? 0.0 : bytes_per_second);
  }
  constexpr std::array<const char*, 5> kUnits = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s"};
  double value = bytes_per_second;
  size_t unit = 0;
  // Scaled after rounding to three significant digits, so 999.7 MB/s reads "1.00 GB/s".
  auto rounded = [](double v) { return std::stod(fmt::format("{:.3g}", v)); };
  while (unit + 1 < kUnits.size() && std::fabs(rounded(value)) >= 1000) {
    value /= 1000;
    ++unit;
  }
  const double magnitude = std::fabs(rounded(value));
  const int decimals = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : 2;
  return format_decimal(value, decimals) + " " + kUnits[unit];
}

}  // namespace partrain
