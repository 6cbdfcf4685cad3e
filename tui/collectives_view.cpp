// The collectives: the most recent matched (comm_id, seq) groups, newest first (size, time,
// busbw, skew and who arrived last), and below them the analyzers' statistics per communicator,
// op and size (`partrain analyze`'s table) once they have run, and at the bottom the expert load
// of a mixture-of-experts run (analyze's expert table, its worst layers).
#include <fmt/format.h>

#include <algorithm>

#include "analyzers/collective_stats.h"
#include "analyzers/expert_load.h"
#include "core/number_format.h"
#include "profiler/trace_reader/communicator_name.h"
#include "tui/units.h"
#include "tui/views.h"

namespace partrain::tui {
namespace {

// group  seq  op  size  time  busbw  skew  last: 80 columns.
constexpr const char* kRecentFormat = "{:<16} {:>6} {:<12.12} {:>9} {:>8} {:>10} {:>8} {:>4}";
constexpr const char* kStatsFormat = "{:<16} {:<12.12} {:>10} {:>7} {:>8} {:>10} {:>8}";
constexpr size_t kCommWidth = 16;
// layer  experts max/mean  ep max/mean  dropped  hottest expert.
constexpr const char* kExpertFormat = "{:>5} {:>16} {:>12} {:>8} {:>16}";
constexpr size_t kMaxExpertRows = 4;

// A communicator by the name users know it by ("tp 1", "default_pg:0"); names that differ at
// their end (a foreign NCCL communicator's hash and split) keep the end when cut.
std::string comm_cell(const std::string& comm_id) {
  const std::string name = profiler::communicator_name(comm_id);
  if (name.size() <= kCommWidth) return name;
  return "~" + name.substr(name.size() - (kCommWidth - 1));
}

// The MoE layers of the latest analysis, the worst (what gates the step) first: at most
// kMaxExpertRows of them, after a title and a header.
std::vector<const analyzers::ExpertLayerBalance*> expert_rows(
    const analyzers::ExpertLoadReport& r) {
  std::vector<const analyzers::ExpertLayerBalance*> rows;
  if (!r.applicable) return rows;
  for (const analyzers::ExpertLayerBalance& l : r.layers) rows.push_back(&l);
  auto key = [&r](const analyzers::ExpertLayerBalance* l) {
    return l->gating_ratio(r.ep).value_or(l->expert_ratio);
  };
  std::stable_sort(rows.begin(), rows.end(), [&](auto* a, auto* b) { return key(a) > key(b); });
  if (rows.size() > kMaxExpertRows) rows.resize(kMaxExpertRows);
  return rows;
}

void render_experts(const analyzers::ExpertLoadReport& report,
                    const std::vector<const analyzers::ExpertLayerBalance*>& rows, ScreenGrid& grid,
                    int x, int y, int width) {
  grid.text(x, y++,
            fmt::format("Experts: {} MoE layer{}, ep {}, load max/mean per step (worst first)",
                        report.layers.size(), report.layers.size() == 1 ? "" : "s",
                        report.ep ? std::to_string(*report.ep) : "unknown"),
            Style::kBold, width);
  grid.text(x, y++,
            fmt::format(fmt::runtime(kExpertFormat), "layer", "experts max/mean", "ep max/mean",
                        "dropped", "hottest expert"),
            Style::kHeader, width);
  for (const analyzers::ExpertLayerBalance* l : rows) {
    const double gating = l->gating_ratio(report.ep).value_or(0);
    const Style style = gating >= analyzers::kExpertImbalanceCritical ? Style::kCritical
                        : gating >= analyzers::kExpertImbalanceWarning ||
                                l->dropped_share >= analyzers::kDroppedTokensWarning
                            ? Style::kWarning
                            : Style::kNormal;
    grid.text(
        x, y++,
        fmt::format(fmt::runtime(kExpertFormat), l->layer, format_decimal(l->expert_ratio, 2) + "x",
                    l->ep_ratio ? format_decimal(*l->ep_ratio, 2) + "x" : "-",
                    format_percent(l->dropped_share),
                    fmt::format("{} ({})", l->hottest_expert, format_percent(l->hottest_share))),
        style, width);
  }
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
  static const analyzers::ExpertLoadReport kNoExperts;
  const analyzers::ExpertLoadReport& experts =
      model.analysis.report ? model.analysis.report->experts : kNoExperts;
  const std::vector<const analyzers::ExpertLayerBalance*> expert_layers = expert_rows(experts);
  // A blank line, the title, the header and the layers.
  const int expert_block = expert_layers.empty() ? 0 : static_cast<int>(expert_layers.size()) + 3;
  const int stats_rows = stats ? std::max(0, std::min<int>(static_cast<int>(rows.size()),
                                                           (area.height - 5 - expert_block) / 2))
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
  const int end = area.y + area.height - (stats ? stats_rows + 3 : 0) - expert_block;
  const int room = std::max(1, end - y);
  const int first = std::clamp(state.scroll, 0, std::max(0, static_cast<int>(recent.size()) - room));
  for (int i = first; i < static_cast<int>(recent.size()) && y < end; ++i) {
    const MatchedCollective& m = *recent[static_cast<size_t>(i)];
    grid.text(area.x, y++,
              // A labelled op by its label (moe_dispatch): it says more than the op.
              fmt::format(fmt::runtime(kRecentFormat), comm_cell(m.comm_id), m.seq,
                          m.label.empty() ? m.op : m.label, format_size(m.bytes),
                          format_ms(m.time_ns), m.busbw_gbps ? format_gbps(*m.busbw_gbps) : "-",
                          format_ms(m.skew_ns), fmt::format("r{}", m.last_rank)),
              m.skew_ns >= 1'000'000 ? Style::kWarning : Style::kNormal, area.width);
  }
  if (recent.empty()) grid.text(area.x, y++, "no matched collective yet", Style::kDim);
  if (expert_block > 0) {
    render_experts(experts, expert_layers, grid, area.x, area.y + area.height - expert_block + 1,
                   area.width);
  }
  if (!stats) return;
  y = end + 1;
  grid.text(area.x, y++, "By communicator, op and size (partrain analyze, " + model.analysis.note + ")",
            Style::kBold, area.width);
  grid.text(area.x, y++,
            fmt::format(fmt::runtime(kStatsFormat), "group", "op", "size", "count", "p50",
                        "busbw", "skew p50"),
            Style::kHeader, area.width);
  for (int i = 0; i < stats_rows && y < area.y + area.height - expert_block; ++i) {
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
