#include "tui/units.h"

#include <fmt/format.h>

#include <cmath>

#include "core/duration.h"
#include "core/number_format.h"

namespace partrain::tui {

std::string format_ms(int64_t ns) {
  const double ms = static_cast<double>(ns) / 1e6;
  // Under 10 us a millisecond figure needs four decimals and outgrows a column ("0.0035 ms"
  // was cut to "0.0035 ~" in the overview's 8-character waited column): micro- or nanoseconds.
  if (ns > 0 && ns < 10'000) return format_duration(Nanoseconds(ns));
  if (ms < 1) return format_decimal(ms, 2) + " ms";  // "0 ms" only for none
  if (ms < 100) return fmt::format("{:.1f} ms", ms);
  if (ms < 1000) return fmt::format("{:.0f} ms", ms);
  if (ms < 60'000) return fmt::format("{:.2f} s", ms / 1000);
  const auto s = static_cast<int64_t>(ms / 1000);
  return fmt::format("{}m{:02}s", s / 60, s % 60);
}

std::string format_elapsed(int64_t ns) {
  const int64_t s = std::max<int64_t>(ns, 0) / 1'000'000'000;
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

std::string format_count(double count) {
  if (count >= 1e6) return fmt::format("{:.1f}M", count / 1e6);
  if (count >= 1e4) return fmt::format("{:.0f}k", count / 1e3);
  if (count >= 1e3) return fmt::format("{:.1f}k", count / 1e3);
  return fmt::format("{:.0f}", count);
}

std::string format_rate(double per_second, const char* unit) {
  return format_count(per_second) + " " + unit;
}

std::string format_size(int64_t bytes) {
  const auto b = static_cast<double>(bytes);
  auto scaled = [](double v, const char* unit) {
    return v < 10 ? fmt::format("{:.2f} {}", v, unit)
                  : v < 100 ? fmt::format("{:.1f} {}", v, unit) : fmt::format("{:.0f} {}", v, unit);
  };
  if (b >= 1073741824.0) return scaled(b / 1073741824.0, "GiB");
  if (b >= 1048576.0) return scaled(b / 1048576.0, "MiB");
  if (b >= 1024.0) return scaled(b / 1024.0, "KiB");
  return fmt::format("{} B", bytes);
}

// core's one bandwidth format: a CPU run's 3e-6 GB/s read "0.00 GB/s" here.
std::string format_gbps(double gbps) { return format_bandwidth(gbps * 1e9); }

}  // namespace partrain::tui
