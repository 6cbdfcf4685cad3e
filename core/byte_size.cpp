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
  // K, M, G and KiB, MiB, GiB are binary (nccl-tests' -b/-e); KB, MB, GB decimal, as partrain
  // prints them ("GB = 10^9 bytes").
  struct Unit {
    std::string_view suffix;
    double bytes;
  };
  static constexpr Unit kUnits[] = {{"", 1},
                                    {"B", 1},
                                    {"b", 1},
                                    {"K", 1024.0},
                                    {"k", 1024.0},
                                    {"KiB", 1024.0},
                                    {"KB", 1e3},
                                    {"kB", 1e3},
                                    {"M", 1048576.0},
                                    {"m", 1048576.0},
                                    {"MiB", 1048576.0},
                                    {"MB", 1e6},
                                    {"G", 1073741824.0},
                                    {"g", 1073741824.0},
                                    {"GiB", 1073741824.0},
                                    {"GB", 1e9},
                                    {"T", 1099511627776.0},
                                    {"TiB", 1099511627776.0},
                                    {"TB", 1e12}};
  const Unit* unit = nullptr;
  for (const Unit& candidate : kUnits) {
    if (candidate.suffix == suffix) unit = &candidate;
  }
  if (unit == nullptr) {
    return invalid_argument(
        "'{}': unknown size suffix '{}' (K, M, G, T or KiB, MiB, GiB, TiB: "
        "binary; KB, MB, GB, TB: decimal)",
        text, suffix);
  }
  double bytes = number * unit->bytes;
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
