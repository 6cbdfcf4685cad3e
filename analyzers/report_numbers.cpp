#include "analyzers/report_numbers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/byte_size.h"

namespace partrain::analyzers {

std::string three_digits(double value) {
  if (value == 0 || !std::isfinite(value)) return fmt::format("{}", value);
  const int magnitude = static_cast<int>(std::floor(std::log10(std::abs(value))));
  const int decimals = std::max(0, 2 - magnitude);
  std::string text = fmt::format("{:.{}f}", value, decimals);
  // Rounding may carry into the next power of ten (9.996 -> "10.00"): one digit fewer.
  if (decimals > 0 && std::abs(std::stod(text)) >= std::pow(10.0, magnitude + 1)) {
    text = fmt::format("{:.{}f}", value, decimals - 1);
  }
  return text;
}

SecondsUnit seconds_unit(double reference) {
  const double r = std::abs(reference);
  if (r >= 1) return {1, "s"};
  if (r >= 1e-3) return {1e3, "ms"};
  return {1e6, "us"};
}

std::string seconds_in(double s, SecondsUnit unit) {
  const double value = s * unit.per_second;
  if (value == 0) return fmt::format("0 {}", unit.name);
  const int magnitude = static_cast<int>(std::floor(std::log10(std::abs(value))));
  if (magnitude >= 0) return three_digits(value) + " " + unit.name;
  return fmt::format("{:.{}f} {}", value, 2 - magnitude, unit.name);
}

std::string seconds_text(double s) { return seconds_in(s, seconds_unit(s)); }

std::string tokens_text(double per_s) {
  if (per_s >= 1e6) return three_digits(per_s / 1e6) + "M tok/s";
  if (per_s >= 1e3) return three_digits(per_s / 1e3) + "k tok/s";
  return three_digits(per_s) + " tok/s";
}

uint64_t truncated_bytes(double bytes) { return static_cast<uint64_t>(std::max(0.0, bytes)); }

std::string gib(double bytes) { return format_bytes(truncated_bytes(bytes)); }

double pct(double part, double whole) { return whole > 0 ? 100 * part / whole : 0; }

}  // namespace partrain::analyzers
