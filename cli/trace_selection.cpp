// The default trace and the parsing of --steps and --rank for the trace-reading commands.
#include "cli/trace_selection.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "runner/launch/trace_path.h"

namespace partrain::cli {
namespace {
namespace fs = std::filesystem;

// Where `launch` and `trace` write their traces when none is named.
constexpr std::string_view kRunsDir = launch::kRunsDirectory;

// A non-negative decimal number and nothing else.
std::optional<int64_t> parse_count(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || text.front() == '-' || ec != std::errc() ||
      end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

StatusOr<fs::path> most_recent_trace(std::string_view example) {
  std::optional<fs::path> newest;
  fs::file_time_type newest_time;
  std::error_code ec;
  for (fs::directory_iterator it(kRunsDir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".db" || !it->is_regular_file(ec)) continue;
    const fs::file_time_type time = it->last_write_time(ec);
    if (!ec && (!newest || time > newest_time)) {
      newest = it->path();
      newest_time = time;
    }
  }
  if (!newest) {
    return invalid_argument("no trace named and no *.db in ./{}: {}", kRunsDir, example);
  }
  return *newest;
}

StatusOr<profiler::StepRange> parse_step_range(std::string_view text) {
  const size_t colon = text.find(':');
  const std::string_view first = colon == std::string_view::npos ? text : text.substr(0, colon);
  const std::string_view last = colon == std::string_view::npos ? text : text.substr(colon + 1);
  profiler::StepRange range;
  if (!first.empty()) range.first = parse_count(first);
  if (!last.empty()) range.last = parse_count(last);
  const bool malformed = (first.empty() && last.empty()) || (!first.empty() && !range.first) ||
                         (!last.empty() && !range.last) ||
                         (range.first && range.last && *range.first > *range.last);
  if (malformed) {
    return invalid_argument(
        "--steps '{}': write A:B (steps A to B, inclusive), A: (step A on), "
        ":B (up to step B) or A (step A alone), with step numbers A <= B",
        text);
  }
  return range;
}

StatusOr<std::vector<int>> parse_rank_list(std::string_view text) {
  // A range's ranks are listed one by one: past this many, a typo (0-99999999) is refused.
  constexpr int64_t kMaxRanks = 1 << 20;
  std::vector<int> ranks;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const size_t dash = item.find('-');
    const std::optional<int64_t> first = parse_count(item.substr(0, dash));
    const std::optional<int64_t> last =
        dash == std::string_view::npos ? first : parse_count(item.substr(dash + 1));
    if (!first || !last || *first > *last || *last > std::numeric_limits<int>::max() ||
        *last - *first >= kMaxRanks - static_cast<int64_t>(ranks.size())) {
      return invalid_argument(
          "--rank '{}': write world ranks separated by commas, A-B for ranks A to B, e.g. 0,2 "
          "or 0-3,6",
          text);
    }
    for (int64_t rank = *first; rank <= *last; ++rank) ranks.push_back(static_cast<int>(rank));
    start = comma + 1;
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

}  // namespace partrain::cli
