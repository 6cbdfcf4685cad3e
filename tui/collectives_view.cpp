// The collectives: the most recent matched (comm_id, seq) groups, newest first (size, time,
// busbw, skew and who arrived last), and below them the analyzers' statistics per communicator,
// op and size (`partrain analyze`'s table) once they have run.
#include <fmt/format.h>

#include <algorithm>

#include "analyzers/collective_stats.h"
#include "profiler/trace_reader/communicator_name.h"
#include "tui/units.h"
#include "tui/views.h"

namespace partrain::tui {
namespace {

// group  seq  op  size  time  busbw  skew  last: 80 columns.
constexpr const char* kRecentFormat = "{:<16} {:>6} {:<12.12} {:>9} {:>8} {:>10} {:>8} {:>4}";
constexpr const char* kStatsFormat = "{:<16} {:<12.12} {:>10} {:>7} {:>8} {:>10} {:>8}";
constexpr size_t kCommWidth = 16;

// A communicator by the name users know it by ("tp 1", "default_pg:0"); names that differ at
// their end (a foreign NCCL communicator's hash and split) keep the end when cut.
std::string comm_cell(const std::string& comm_id) {
  const std::string name = profiler::communicator_name(comm_id);
  if (name.size() <= kCommWidth) return name;
  return "~" + name.substr(name.size() - (kCommWidth - 1));
}

}  // namespace

void render_collectives(const ViewModel& model, const UiState& state, ScreenGrid& grid, Rect area) {
  std::vector<const MatchedCollective*> recent;
  for (auto it = model.collectives.rbegin(); it != model.collectives.rend(); ++it) {
    if (rank_shown(state, it->last_rank)) recent.push_back(&*it);
  }
  static const std::vector<analyzers::CollectiveStatsRow> kNoRows;
  const std::vector<analyzers::CollectiveStatsRow>& rows =
      model.analysis.report ? model.analysis.report->collectives.rows : kNoRows;
  const bool stats = model.analysis.available() && !rows.empty();
  const int stats_rows = stats ? std::min<int>(static_cast<int>(rows.size()),
                                               (area.height - 5) / 2)
                               : 0;
  int y = area.y;
  grid.text(area.x, y++,
            fmt::format("Collectives: {} recent matched, newest first (time: median member)",
                        recent.size()),
            Style::kBold, area.width);
  grid.text(area.x, y++,
            fmt::format(fmt::runtime(kRecentFormat), "group", "seq", "op", "size", "time", "busbw",
                        "skew", "last"),
            Style::kHeader, area.width);
  const int end = area.y + area.height - (stats ? stats_rows + 3 : 0);
  const int room = std::max(1, end - y);
  const int first = std::clamp(state.scroll, 0, std::max(0, static_cast<int>(recent.size()) - room));
  for (int i = first; i < static_cast<int>(recent.size()) && y < end; ++i) {
    const MatchedCollective& m = *recent[static_cast<size_t>(i)];
    grid.text(area.x, y++,
              fmt::format(fmt::runtime(kRecentFormat), comm_cell(m.comm_id), m.seq, m.op, format_size(m.bytes),
                          format_ms(m.time_ns), format_gbps(m.busbw_gbps), format_ms(m.skew_ns),
                          fmt::format("r{}", m.last_rank)),
              m.skew_ns >= 1'000'000 ? Style::kWarning : Style::kNormal, area.width);
  }
  if (recent.empty()) grid.text(area.x, y++, "no matched collective yet", Style::kDim);
  if (!stats) return;
  y = end + 1;
  grid.text(area.x, y++, "By communicator, op and size (partrain analyze, " + model.analysis.note + ")",
            Style::kBold, area.width);
  grid.text(area.x, y++,
            fmt::format(fmt::runtime(kStatsFormat), "group", "op", "size", "count", "p50",
                        "busbw", "skew p50"),
            Style::kHeader, area.width);
  for (int i = 0; i < stats_rows && y < area.y + area.height; ++i) {
    const analyzers::CollectiveStatsRow& r = rows[static_cast<size_t>(i)];
    grid.text(area.x, y++,
              fmt::format(fmt::runtime(kStatsFormat), comm_cell(r.comm_id), r.op,
                          format_size(r.size_bucket) + "+", r.count,
                          format_ms(static_cast<int64_t>(r.time_p50_ms * 1e6)),
                          format_gbps(r.busbw_gbps),
                          format_ms(static_cast<int64_t>(r.skew_p50_ms * 1e6))),
              Style::kNormal, area.width);
  }
}

}  // namespace partrain::tui
