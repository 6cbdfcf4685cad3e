// The timeline: a row per rank, time left to right, each cell the kind of work that covered
// most of its slice of time (compute, communication, memcpy; idle when little did), with step
// boundaries on the ruler above. It follows the newest data until the user pans back.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "tui/units.h"
#include "tui/views.h"

namespace partrain::tui {
namespace {

constexpr int kLabelWidth = 6;  // "r123 " before the cells

struct Coverage {
  std::array<int64_t, 6> ns{};  // by Activity
};

// Per cell, how long each kind covered it.
std::vector<Coverage> cover(const std::deque<TimelineSlice>& slices, int64_t start, int64_t cell_ns,
                            int cells) {
  std::vector<Coverage> out(static_cast<size_t>(cells));
  const int64_t end = start + cell_ns * cells;
  for (const TimelineSlice& s : slices) {
    if (s.end_ns <= start || s.start_ns >= end) continue;
    const int64_t from = std::max(s.start_ns, start), to = std::min(s.end_ns, end);
    for (int64_t i = (from - start) / cell_ns; i < cells && start + i * cell_ns < to; ++i) {
      const int64_t lo = std::max(from, start + i * cell_ns);
      const int64_t hi = std::min(to, start + (i + 1) * cell_ns);
      if (hi > lo) out[static_cast<size_t>(i)].ns[static_cast<size_t>(s.kind)] += hi - lo;
    }
  }
  return out;
}

Cell cell_for(const Coverage& c, int64_t cell_ns, const Glyphs& g) {
  size_t best = 0;
  for (size_t k = 1; k < c.ns.size(); ++k) {
    if (c.ns[k] > c.ns[best]) best = k;
  }
  // Less than a quarter of the cell covered by anything reads as idle.
  if (c.ns[best] * 4 < cell_ns) return {g.idle, Style::kIdle};
  switch (static_cast<Activity>(best)) {
    case Activity::kCompute: return {g.compute, Style::kCompute};
    case Activity::kComm: return {g.comm, Style::kComm};
    case Activity::kMemcpy: return {g.memcpy, Style::kMemcpy};
    case Activity::kSync:
    case Activity::kPhase:
    case Activity::kStep: break;
  }
  return {g.idle, Style::kIdle};
}

}  // namespace

void render_timeline(const ViewModel& model, const UiState& state, const Glyphs& glyphs,
                     ScreenGrid& grid, Rect area) {
  const int64_t span = std::max<int64_t>(state.timeline.span_ns.value_or(default_span_ns(model)), 1);
  const int64_t newest = newest_data_ns(model);
  const int64_t end = state.timeline.end_ns.value_or(newest);
  const int cells = std::max(area.width - kLabelWidth, 1);
  const int64_t cell_ns = std::max<int64_t>(span / cells, 1);
  const int64_t start = end - cell_ns * cells;
  int y = area.y;
  grid.text(area.x, y++,
            fmt::format("Timeline: {} shown, {} per cell, {}", format_ms(cell_ns * cells),
                        format_ms(cell_ns),
                        state.timeline.end_ns ? fmt::format("ending {} before the newest data",
                                                            format_ms(newest - end))
                                              : std::string("following the newest data")),
            Style::kBold, area.width);

  // Ruler: step boundaries of the first shown rank, with the step number after each.
  const RankStatus* reference = nullptr;
  for (const RankStatus& row : model.ranks) {
    if (rank_shown(state, row.rank)) {
      reference = &row;
      break;
    }
  }
  grid.text(area.x, y, "step", Style::kHeader);
  if (reference) {
    auto marks = model.steps.find(reference->rank);
    if (marks != model.steps.end()) {
      std::vector<std::pair<int, int64_t>> shown;  // column, step
      for (const StepMark& mark : marks->second) {
        if (mark.start_ns < start || mark.start_ns >= end) continue;
        shown.emplace_back(kLabelWidth + static_cast<int>((mark.start_ns - start) / cell_ns),
                           mark.step);
      }
      // A step's number only where it fits whole before the next marker: a cut "1" for 16 reads
      // as step 1.
      for (size_t i = 0; i < shown.size(); ++i) {
        const auto [x, step] = shown[i];
        grid.put(x, y, glyphs.step_marker, Style::kBold);
        const int room = (i + 1 < shown.size() ? shown[i + 1].first : area.width) - x - 1;
        const std::string label = std::to_string(step);
        if (static_cast<int>(label.size()) <= room) grid.text(x + 1, y, label, Style::kDim);
      }
    }
  }
  ++y;

  std::vector<const RankStatus*> rows;
  for (const RankStatus& row : model.ranks) {
    if (rank_shown(state, row.rank)) rows.push_back(&row);
  }
  const int room = std::max(1, area.y + area.height - y - 1);
  const int first = std::clamp(state.scroll, 0, std::max(0, static_cast<int>(rows.size()) - room));
  bool before_loaded = false;
  for (int i = first; i < static_cast<int>(rows.size()) && y < area.y + area.height - 1; ++i) {
    const int rank = rows[static_cast<size_t>(i)]->rank;
    grid.text(area.x, y, fmt::format("r{}", rank), Style::kBold, kLabelWidth - 1);
    auto slices = model.slices.find(rank);
    const bool any = slices != model.slices.end() && !slices->second.empty();
    // A rank with nothing loaded is not known idle either.
    if (model.older_slices_dropped && (!any || slices->second.front().start_ns > start)) {
      before_loaded = true;
    }
    if (any) {
      const std::vector<Coverage> coverage = cover(slices->second, start, cell_ns, cells);
      for (int x = 0; x < cells; ++x) {
        const Cell cell = cell_for(coverage[static_cast<size_t>(x)], cell_ns, glyphs);
        grid.put(area.x + kLabelWidth + x, y, cell.ch, cell.style);
      }
    }
    ++y;
  }
  std::string legend;
  const int bottom = area.y + area.height - 1;
  int x = area.x;
  const char32_t legend_glyphs[] = {glyphs.compute, glyphs.comm, glyphs.memcpy, glyphs.idle};
  const Style legend_styles[] = {Style::kCompute, Style::kComm, Style::kMemcpy, Style::kIdle};
  const char* legend_names[] = {"compute", "comm", "memcpy", "idle"};
  for (int i = 0; i < 4; ++i) {
    grid.put(x, bottom, legend_glyphs[i], legend_styles[i]);
    x += 3 + grid.text(x + 2, bottom, legend_names[i], Style::kDim);
  }
  grid.put(x, bottom, glyphs.step_marker, Style::kBold);
  x += 3 + grid.text(x + 2, bottom, "step start", Style::kDim);
  grid.text(x + 1, bottom,
            before_loaded ? "(older slices not loaded: partrain export has them all)"
                          : "[ ] zoom  h/l pan  f follow",
            Style::kDim);
}

}  // namespace partrain::tui
