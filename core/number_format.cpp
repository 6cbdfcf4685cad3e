#include "core/number_format.h"

#include <fmt/format.h>

#include <array>
#include <cmath>

namespace partrain {

std::string format_decimal(double value, int decimals) {
  if (value == 0 || !std::isfinite(value)) return fmt::format("{}", value == 0 ? 0.0 : value);
  // A value below the column's last place (0.0054 at two decimals) has no digit of its own
  // there: the column would show it as 0 or as the next place up ("0.01", nearly twice it).
  if (std::fabs(value) < std::pow(10.0, -decimals)) return fmt::format("{:.2g}", value);
  return fmt::format("{:.{}f}", value, decimals);
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
