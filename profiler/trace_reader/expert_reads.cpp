#include "profiler/trace_reader/expert_reads.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <string_view>
#include <utility>

namespace partrain::profiler {
namespace {

constexpr std::string_view kExpertTable = "expert_load";

// The writer's "[12,0,7]": integers, commas, brackets (spaces tolerated, as a hand-edited or
// sqlite3-rewritten array may have them). False on anything else.
bool parse_tokens(std::string_view text, std::vector<int64_t>& out) {
  out.clear();
  auto skip_spaces = [&] {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  };
  skip_spaces();
  if (text.empty() || text.front() != '[') return false;
  text.remove_prefix(1);
  skip_spaces();
  if (!text.empty() && text.front() == ']') return text.size() == 1;
  while (true) {
    skip_spaces();
    int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc()) return false;
    out.push_back(value);
    text.remove_prefix(static_cast<size_t>(end - text.data()));
    skip_spaces();
    if (text.empty()) return false;
    const char separator = text.front();
    text.remove_prefix(1);
    if (separator == ']') break;
    if (separator != ',') return false;
  }
  skip_spaces();
  return text.empty();
}

// `steps` as SQL bounds: every step when `all` is set.
std::pair<int64_t, int64_t> step_bounds(const StepFilter& steps) {
  if (steps.all) return {INT64_MIN, INT64_MAX};
  return {steps.first, steps.last};
}

}  // namespace

bool ExpertLoadCursor::next(ExpertLoadRow& row) {
  if (!step()) return false;
  row.rank = static_cast<int>(stmt_.column_int(0));
  row.step = stmt_.column_int(1);
  row.layer = static_cast<int>(stmt_.column_int(2));
  if (!parse_tokens(stmt_.column_text(3), row.tokens_per_expert)) {
    return fail(make_status(StatusCode::kUnreadable,
                            "the expert_load row of rank {}, step {}, layer {} has a tokens "
                            "array that is not a list of integers",
                            row.rank, row.step, row.layer));
  }
  row.dropped_tokens = stmt_.column_int(4);
  row.aux_loss = stmt_.column_is_null(5) ? std::nullopt : std::optional(stmt_.column_double(5));
  return true;
}

StatusOr<std::vector<ExpertLayerSource>> expert_layer_sources(const TraceReader& reader,
                                                              const StepFilter& steps) {
  std::vector<ExpertLayerSource> sources;
  if (!reader.db().has_table("main", kExpertTable)) return sources;
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT layer, MIN(rank), COUNT(DISTINCT rank) FROM expert_load "
                                  "WHERE step BETWEEN ?1 AND ?2 GROUP BY layer ORDER BY layer"));
  const auto [first, last] = step_bounds(steps);
  stmt.bind(1, first);
  stmt.bind(2, last);
  RETURN_IF_ERROR(reader.each_row(stmt, "listing the expert layers", [&](const SqliteStatement& r) {
    sources.push_back({static_cast<int>(r.column_int(0)), static_cast<int>(r.column_int(1)),
                       static_cast<int>(r.column_int(2))});
  }));
  return sources;
}

StatusOr<ExpertLoadCursor> expert_loads(const TraceReader& reader, int rank, int layer,
                                        const StepFilter& steps) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare("SELECT rank, step, layer, tokens, dropped_tokens, aux_loss "
                                  "FROM expert_load WHERE rank = ?1 AND step BETWEEN ?2 AND ?3 "
                                  "AND layer = ?4 ORDER BY step"));
  const auto [first, last] = step_bounds(steps);
  stmt.bind(1, int64_t{rank});
  stmt.bind(2, first);
  stmt.bind(3, last);
  stmt.bind(4, int64_t{layer});
  return ExpertLoadCursor(reader.db(), std::move(stmt),
                          fmt::format("reading layer {}'s expert loads from rank {}", layer, rank));
}

}  // namespace partrain::profiler
