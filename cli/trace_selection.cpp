// The default trace and the parsing of --steps and --rank for the trace-reading commands.
#include "cli/trace_selection.h"

#include <optional>

#include "core/count_text.h"
#include "core/rank_list.h"
#include "runner/launch/trace_path.h"

namespace partrain::cli {
namespace {
namespace fs = std::filesystem;

// Where `launch` and `trace` write their traces when none is named.
constexpr std::string_view kRunsDir = launch::kRunsDirectory;

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
  StatusOr<std::vector<int>> ranks = partrain::parse_rank_list(text);
  if (!ranks.is_ok()) return invalid_argument("--rank {}", ranks.status().message());
  return ranks;
}

}  // namespace partrain::cli
