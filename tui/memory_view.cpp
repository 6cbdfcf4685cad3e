// The memory view: one rank's memory over time, stacked by category from the bottom (params,
// grads, optimizer, activations, comm, workspace, other) with the estimate as a line over an
// axis of the run's elapsed time, and a
// table of each category now, at its peak and as estimated (DESIGN.md "Analyses": memory peak
// per category vs estimate).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analyzers/memory_vs_estimate.h"
#include "tui/text_wrap.h"
#include "tui/units.h"
#include "tui/views.h"

namespace partrain::tui {
namespace {

constexpr int kAxisWidth = 10;  // "1.23 GiB |" left of the chart

int64_t total(const CategoryBytes& bytes) {
  int64_t t = 0;
  for (int64_t b : bytes) t += b;
  return t;
}

// The sample in force at the end of each column's time range.
std::vector<CategoryBytes> columns_of(const MemoryChart& mem, int columns) {
  std::vector<CategoryBytes> out(static_cast<size_t>(columns));
  if (mem.points.empty() || columns <= 0) return out;
  const int64_t first = mem.points.front().ts_ns;
  const int64_t last = mem.points.back().ts_ns;
  const double per_column = std::max<double>(static_cast<double>(last - first) / columns, 1);
  size_t p = 0;
  CategoryBytes current = mem.points.front().bytes;
  for (int x = 0; x < columns; ++x) {
    const double column_end = static_cast<double>(first) + per_column * (x + 1);
    CategoryBytes highest = current;
    // The column shows the highest total sampled in it, so short peaks stay visible.
    while (p < mem.points.size() && static_cast<double>(mem.points[p].ts_ns) <= column_end) {
      current = mem.points[p].bytes;
      if (total(current) > total(highest)) highest = current;
      ++p;
    }
    out[static_cast<size_t>(x)] = highest;
  }
  return out;
}

// The stacked chart of `mem` in `height` rows from row y.
void draw_chart(const MemoryChart& mem, const Glyphs& glyphs, ScreenGrid& grid, Rect area, int y,
                int height) {
  const int chart_width = area.width - kAxisWidth;
  double scale = static_cast<double>(std::max(mem.peak_total, mem.estimate_total.value_or(0)));
  scale = scale > 0 ? scale * 1.05 : 1;
  const std::vector<CategoryBytes> columns = columns_of(mem, chart_width);
  const int estimate_row =
      mem.estimate_total
          ? height - 1 - static_cast<int>(static_cast<double>(*mem.estimate_total) / scale * height)
          : -1;
  for (int r = 0; r < height; ++r) {
    // Row r covers values [hi - scale / height, hi), counted from the bottom.
    const double hi = scale * (height - r) / height;
    const double mid = hi - scale / height / 2;
    // The axis names the top of the scale, the estimate's row and zero.
    if (r == estimate_row) {
      grid.text(area.x, y + r, format_size(*mem.estimate_total), Style::kEstimate, kAxisWidth - 2);
    } else if (r == 0) {
      grid.text(area.x, y + r, format_size(static_cast<int64_t>(hi)), Style::kDim, kAxisWidth - 2);
    } else if (r == height - 1) {
      grid.text(area.x, y + r, "0 B", Style::kDim, kAxisWidth - 2);
    }
    grid.put(area.x + kAxisWidth - 1, y + r, glyphs.vertical, Style::kDim);
    for (int x = 0; x < chart_width; ++x) {
      const CategoryBytes& bytes = columns[static_cast<size_t>(x)];
      double below = 0;
      Cell cell{U' ', Style::kNormal};
      for (size_t c = 0; c < bytes.size(); ++c) {
        const double top = below + static_cast<double>(bytes[c]);
        if (mid >= below && mid < top) {
          cell = {glyphs.memory[c], memory_style(c)};
          break;
        }
        below = top;
      }
      if (cell.ch == U' ' && r == estimate_row) cell = {glyphs.estimate, Style::kEstimate};
      grid.put(area.x + kAxisWidth + x, y + r, cell.ch, cell.style);
    }
  }
  if (mem.points.empty()) {
    grid.text(area.x + kAxisWidth + 1, y + height - 1, "no memory samples yet", Style::kDim);
  }
}

// The time axis under the chart: the run's elapsed time at the chart's first column, its middle
// and its last, on a line.
void draw_time_axis(const MemoryChart& mem, int64_t run_start_ns, const Glyphs& glyphs,
                    ScreenGrid& grid, Rect area, int y) {
  const int chart_x = area.x + kAxisWidth;
  const int chart_width = area.width - kAxisWidth;
  grid.text(area.x, y, "elapsed", Style::kDim, kAxisWidth - 2);
  grid.put(chart_x - 1, y, glyphs.corners[2], Style::kDim);
  for (int x = 0; x < chart_width; ++x) grid.put(chart_x + x, y, glyphs.horizontal, Style::kDim);
  if (mem.points.empty()) return;
  const int64_t first = mem.points.front().ts_ns;
  const int64_t last = mem.points.back().ts_ns;
  const int64_t origin = run_start_ns > 0 && run_start_ns <= first ? run_start_ns : first;
  // Seconds with a decimal while the chart spans under a minute, else m:ss.
  const bool short_span = last - origin < 60'000'000'000;
  auto label = [short_span](int64_t ns) {
    return short_span ? fmt::format("{:.1f} s", static_cast<double>(ns) / 1e9)
                      : format_elapsed(ns);
  };
  const std::string start = label(first - origin);
  const std::string middle = label((first + last) / 2 - origin);
  const std::string end = label(last - origin);
  grid.text(chart_x, y, start, Style::kDim);
  grid.text(chart_x + (chart_width - static_cast<int>(middle.size())) / 2, y, middle, Style::kDim);
  grid.text(chart_x + chart_width - static_cast<int>(end.size()), y, end, Style::kDim);
}

// Each category in use, at its peak and estimated, from row y to the area's bottom.
void draw_table(const RankStatus& row, const MemoryChart& mem, const Glyphs& glyphs,
                ScreenGrid& grid, Rect area, int y) {
  constexpr const char* kFormat = "  {:<12} {:>10} {:>10} {:>10} {:>8}";
  grid.text(area.x, y++, fmt::format(fmt::runtime(kFormat), "category", "in use", "peak",
                                     "estimate", "error"),
            Style::kHeader, area.width);
  for (size_t c = 0; c < kMemoryCategories && y < area.y + area.height; ++c) {
    const std::optional<int64_t> estimate = mem.estimate[c];
    if (row.memory_bytes[c] == 0 && mem.peak[c] == 0 && !estimate) continue;
    std::string error = "-";
    if (estimate && *estimate > 0) {
      error = fmt::format("{:+.1f}%", 100.0 * static_cast<double>(mem.peak[c] - *estimate) /
                                          static_cast<double>(*estimate));
    }
    grid.text(area.x, y,
              fmt::format(fmt::runtime(kFormat), memory::category_name(memory::kAllCategories[c]),
                          format_size(row.memory_bytes[c]), format_size(mem.peak[c]),
                          estimate ? format_size(*estimate) : std::string("-"), error),
              Style::kNormal, area.width);
    grid.put(area.x, y++, glyphs.memory[c], memory_style(c));
  }
}

}  // namespace

void render_memory(const ViewModel& model, const UiState& state, const Glyphs& glyphs,
                   ScreenGrid& grid, Rect area) {
  std::vector<int> ranks;
  for (const RankStatus& row : model.ranks) {
    if (rank_shown(state, row.rank)) ranks.push_back(row.rank);
  }
  if (ranks.empty()) {
    grid.text(area.x, area.y, "Memory: no rank to show", Style::kBold);
    return;
  }
  // h/l move the choice; it wraps around the shown ranks.
  const int n = static_cast<int>(ranks.size());
  const int chosen = (state.memory_rank % n + n) % n;
  const int rank = ranks[static_cast<size_t>(chosen)];
  const RankStatus& row = *std::find_if(model.ranks.begin(), model.ranks.end(),
                                        [rank](const RankStatus& r) { return r.rank == rank; });
  auto found = model.memory.find(rank);
  if (found == model.memory.end()) {
    // Nothing recorded is not 0 B: say so, as analyze does, instead of an empty chart at zero.
    grid.text(area.x, area.y, fmt::format("Memory: rank {} (h/l), not recorded", rank),
              Style::kBold, area.width);
    int y = area.y + 2;
    for (const std::string& line :
         wrap_words("", analyzers::memory_unrecorded_reason(model.imported), area.width, 0)) {
      if (y >= area.y + area.height) break;
      grid.text(area.x, y++, line, Style::kDim, area.width);
    }
    return;
  }
  const MemoryChart& mem = found->second;
  std::string title = fmt::format("Memory: rank {} (h/l), in use {}, peak {}", rank,
                                  format_size(row.memory_total()), format_size(mem.peak_total));
  if (mem.estimate_total) title += ", estimate " + format_size(*mem.estimate_total);
  grid.text(area.x, area.y, title, Style::kBold, area.width);

  const int table_rows = 1 + static_cast<int>(kMemoryCategories);
  const int chart_height = std::max(3, area.height - 1 - table_rows - 2);  // title, axis, blank
  draw_chart(mem, glyphs, grid, area, area.y + 1, chart_height);
  draw_time_axis(mem, model.start_ns, glyphs, grid, area, area.y + 1 + chart_height);
  draw_table(row, mem, glyphs, grid, area, area.y + 2 + chart_height);
}

}  // namespace partrain::tui
