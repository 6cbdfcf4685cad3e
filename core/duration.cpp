#include "core/duration.h"

#include <charconv>
#include <cmath>

namespace partrain {

StatusOr<Nanoseconds> parse_duration(std::string_view text) {
  std::string_view input = text;
  while (!input.empty() && input.front() == ' ') input.remove_prefix(1);
  while (!input.empty() && input.back() == ' ') input.remove_suffix(1);
  double number = 0;
  auto [end, ec] = std::from_chars(input.data(), input.data() + input.size(), number);
  if (ec != std::errc() || input.empty()) {
    return invalid_argument("'{}' is not a duration: write a number with an optional unit "
                            "(ns, us, ms, s, m, h), e.g. 10s or 500ms",
                            text);
  }
  std::string_view unit(end, static_cast<size_t>(input.data() + input.size() - end));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  double scale = 0;
  if (unit.empty() || unit == "s" || unit == "sec") scale = 1e9;
  else if (unit == "ms") scale = 1e6;
  else if (unit == "us") scale = 1e3;
  else if (unit == "ns") scale = 1;
  else if (unit == "m" || unit == "min") scale = 60e9;
  else if (unit == "h") scale = 3600e9;
  else if (unit.size() > 1 && unit.front() == ',' && unit[1] >= '0' && unit[1] <= '9') {
    return invalid_argument("'{}': write a decimal point, not a comma ({}.{})", text,
                            input.substr(0, static_cast<size_t>(end - input.data())),
                            unit.substr(1));
  } else {
    return invalid_argument("'{}': unknown duration unit '{}' (use ns, us, ms, s, m or h)", text,
                            unit);
  }
  if (!std::isfinite(number) || number < 0) {
    return invalid_argument("'{}': a duration must be a finite number >= 0", text);
  }
  double ns = number * scale;
  if (ns > 9.2e18) return invalid_argument("'{}': duration too long", text);
  return Nanoseconds(static_cast<int64_t>(std::llround(ns)));
}

std::string format_duration(Nanoseconds duration) {
  auto ns = static_cast<double>(duration.count());
  // Past 999 s, "{:.3g}" would write "1.2e+03 s": minutes, then hours.
  if (ns >= 3600e9) return fmt::format("{:.3g} h", ns / 3600e9);
  if (ns >= 999.5e9) return fmt::format("{:.3g} min", ns / 60e9);
  if (ns >= 1e9) return fmt::format("{:.3g} s", ns / 1e9);
  if (ns >= 1e6) return fmt::format("{:.3g} ms", ns / 1e6);
  if (ns >= 1e3) return fmt::format("{:.3g} us", ns / 1e3);
  return fmt::format("{} ns", duration.count());
}

}  // namespace partrain
