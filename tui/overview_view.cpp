// The overview: a row per rank (step, step time, tokens/s per GPU, how its last step split into
// compute, exposed communication, exposed memcpy and idle, memory in use by category, its latest
// collective and how long it waited there, the straggler mark), then the run's step time and
// loss over its latest steps as sparklines, then a legend. The two bars share the width left
// over by the fixed columns, so a wider terminal gets finer bars.
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "analyzers/live_hang.h"
#include "tui/bars.h"
#include "tui/units.h"
#include "tui/views.h"

namespace partrain::tui {
namespace {

// Fixed columns and their widths; the two bars take the rest.
constexpr int kRankWidth = 4, kStepWidth = 6, kStepTimeWidth = 9, kRateWidth = 6, kMemWidth = 9,
              kCollectiveWidth = 12, kWaitWidth = 8, kMarkWidth = 1;
constexpr int kFixedWidth = kRankWidth + kStepWidth + kStepTimeWidth + kRateWidth + kMemWidth +
                            kCollectiveWidth + kWaitWidth + kMarkWidth + 9;  // + 9 separators
// Below the rank rows: a blank line, the step-time and loss sparklines, a blank line, the legend.
constexpr int kFooterRows = 6;
// The sparklines' label column ("step time ", "loss      ").
constexpr int kSparkLabelWidth = 10;
// A live rank silent this long is shown as quiet instead of with its last collective.
constexpr int64_t kQuietNs = 2'000'000'000;

struct Columns {
  int rank, step, step_time, rate, time_bar, time_bar_width, memory_bar, memory_bar_width, memory,
      collective, wait, mark;
};

Columns columns(int width) {
  const int bars = std::max(width - kFixedWidth, 10);
  Columns c{};
  c.time_bar_width = (bars * 55 + 50) / 100;
  c.memory_bar_width = bars - c.time_bar_width;
  int x = 0;
  auto next = [&x](int w) {
    const int at = x;
    x += w + 1;
    return at;
  };
  c.rank = next(kRankWidth);
  c.step = next(kStepWidth);
  c.step_time = next(kStepTimeWidth);
  c.rate = next(kRateWidth);
  c.time_bar = next(c.time_bar_width);
  c.memory_bar = next(c.memory_bar_width);
  c.memory = next(kMemWidth);
  c.collective = next(kCollectiveWidth);
  c.wait = next(kWaitWidth);
  c.mark = next(kMarkWidth);
  return c;
}

void right(ScreenGrid& grid, int x, int y, int width, const std::string& text, Style style) {
  const int n = std::min<int>(static_cast<int>(text.size()), width);
  grid.text(x + width - n, y, text, style, width);
}

// `compute_known` false (no rank recorded compute): communication, memcpy, and the rest as
// unrecorded, not as idle.
std::vector<BarSegment> time_segments(const RankBreakdown& b, const Glyphs& g, bool compute_known) {
  if (!compute_known) {
    const int64_t rest = std::max<int64_t>(0, b.window_ns - b.comm_ns - b.exposed_memcpy_ns());
    return {{static_cast<double>(b.comm_ns), g.comm, Style::kComm},
            {static_cast<double>(b.exposed_memcpy_ns()), g.memcpy, Style::kMemcpy},
            {static_cast<double>(rest), g.unrecorded, Style::kDim}};
  }
  return {{static_cast<double>(b.compute_ns), g.compute, Style::kCompute},
          {static_cast<double>(b.exposed_comm_ns()), g.comm, Style::kComm},
          {static_cast<double>(b.exposed_memcpy_ns()), g.memcpy, Style::kMemcpy},
          {static_cast<double>(b.idle_ns()), g.idle, Style::kIdle}};
}

std::vector<BarSegment> memory_segments(const CategoryBytes& bytes, const Glyphs& g) {
  std::vector<BarSegment> segments;
  for (size_t c = 0; c < bytes.size(); ++c) {
    segments.push_back({static_cast<double>(bytes[c]), g.memory[c], memory_style(c)});
  }
  return segments;
}

// What the memory column shows: memory in use now while the run is live; once it has ended
// (everything freed, so "now" is zero) the breakdown at the rank's highest total, which is what
// someone browsing a finished run wants to compare with the estimate.
CategoryBytes shown_memory(const ViewModel& model, const RankStatus& row) {
  if (model.live) return row.memory_bytes;
  auto it = model.memory.find(row.rank);
  if (it == model.memory.end() || it->second.points.empty()) return row.memory_bytes;
  const MemoryPoint* peak = &it->second.points.front();
  for (const MemoryPoint& point : it->second.points) {
    if (total_bytes(point.bytes) > total_bytes(peak->bytes)) peak = &point;
  }
  return peak->bytes;
}

// One scale for every row's memory bar, so bars compare across ranks: the largest of what any
// shown rank uses, has peaked at, or is estimated to need.
double memory_scale(const ViewModel& model, const UiState& state) {
  double scale = 0;
  for (const RankStatus& row : model.ranks) {
    if (!rank_shown(state, row.rank)) continue;
    scale = std::max(scale, static_cast<double>(row.memory_total()));
    if (auto it = model.memory.find(row.rank); it != model.memory.end()) {
      scale = std::max(scale, static_cast<double>(it->second.peak_total));
      scale = std::max(scale, static_cast<double>(it->second.estimate_total.value_or(0)));
    }
  }
  return scale;
}

void render_collective(const ViewModel& model, const RankStatus& row, const Columns& c,
                       ScreenGrid& grid, int y) {
  const std::optional<int64_t> quiet = analyzers::quiet_on_timeline_ns(model, row);
  if (row.exit_signal && *row.exit_signal != 0) {
    grid.text(c.collective, y, fmt::format("signal {}", *row.exit_signal), Style::kCritical,
              kCollectiveWidth);
  } else if (row.exit_code && *row.exit_code != 0) {
    grid.text(c.collective, y, fmt::format("exit {}", *row.exit_code), Style::kCritical,
              kCollectiveWidth);
  } else if (quiet && *quiet > kQuietNs) {
    grid.text(c.collective, y, "quiet", Style::kWarning, kCollectiveWidth);
    right(grid, c.wait, y, kWaitWidth, format_ms(*quiet), Style::kWarning);
  } else if (row.collective) {
    grid.text(c.collective, y, row.collective->op, Style::kNormal, kCollectiveWidth);
    right(grid, c.wait, y, kWaitWidth, format_ms(row.collective->waited_ns),
          row.collective->matched ? Style::kNormal : Style::kDim);
  } else {
    grid.text(c.collective, y, "-", Style::kDim);
  }
}

void render_legend(const Glyphs& g, ScreenGrid& grid, int x, int y, int width, bool compute_known) {
  int at = x + grid.text(x, y, "step: ", Style::kDim, width);
  // Each glyph in its own style, as the bars draw it.
  const Style styles[] = {Style::kCompute, Style::kComm, Style::kMemcpy, Style::kIdle};
  const char* names[] = {"compute", "exposed comm", "memcpy", "idle"};
  const char32_t glyphs[] = {g.compute, g.comm, g.memcpy, g.idle};
  // Each entry: the glyph in its style, a space, the name, a space.
  auto entry = [&grid, &at](int row, char32_t glyph, Style style, std::string_view name) {
    grid.put(at, row, glyph, style);
    at += 3 + grid.text(at + 2, row, name, Style::kDim);
  };
  for (int i = 0; i < 4; ++i) entry(y, glyphs[i], styles[i], names[i]);
  if (!compute_known) entry(y, g.unrecorded, Style::kDim, "not recorded (no compute seen)");
  entry(y, g.straggler, Style::kWarning, "straggler");
  entry(y, g.vertical, Style::kEstimate, "memory estimate");
  at = x + grid.text(x, y + 1, "mem:  ", Style::kDim, width);
  for (size_t c = 0; c < memory::kAllCategories.size(); ++c) {
    entry(y + 1, g.memory[c], memory_style(c), memory::category_name(memory::kAllCategories[c]));
  }
}

// The run's latest steps (those every rank finished) as two sparklines: the slowest rank's step
// time and the loss, each with its latest value and range. Two rows from y.
void render_history(const ViewModel& model, const Glyphs& glyphs, ScreenGrid& grid, int x, int y,
                    int width) {
  constexpr int kSummaryWidth = 42;
  grid.text(x, y, "step time", Style::kDim, kSparkLabelWidth);
  grid.text(x, y + 1, "loss", Style::kDim, kSparkLabelWidth);
  const int spark_x = x + kSparkLabelWidth;
  if (model.history.empty()) {
    // A run that is over will finish no step: it recorded none every rank finished.
    grid.text(spark_x, y,
              model.live ? "- (no step finished by every rank yet)"
                         : "- (the run recorded no step every rank finished)",
              Style::kDim, width - kSparkLabelWidth);
    grid.text(spark_x, y + 1, "-", Style::kDim);
    return;
  }
  const int spark_width = std::max(8, width - kSparkLabelWidth - kSummaryWidth - 1);
  const size_t n = std::min(model.history.size(), static_cast<size_t>(spark_width));
  std::vector<double> times, losses;
  int64_t fastest = INT64_MAX, slowest = 0;
  std::optional<double> first_loss, last_loss;
  int64_t first_loss_step = 0;
  for (size_t i = model.history.size() - n; i < model.history.size(); ++i) {
    const StepPoint& point = model.history[i];
    times.push_back(static_cast<double>(point.slowest_ns));
    fastest = std::min(fastest, point.slowest_ns);
    slowest = std::max(slowest, point.slowest_ns);
    if (!point.loss) continue;
    losses.push_back(*point.loss);
    if (!first_loss) {
      first_loss = point.loss;
      first_loss_step = point.step;
    }
    last_loss = point.loss;
  }
  draw_cells(grid, spark_x, y, sparkline(times, glyphs.levels, Style::kCompute));
  const int summary_x = spark_x + static_cast<int>(times.size()) + 1;
  grid.text(summary_x, y,
            fmt::format("{} ({} - {}, last {})", format_ms(model.history.back().slowest_ns),
                        format_ms(fastest), format_ms(slowest), analyzers::steps_phrase(n)),
            Style::kNormal, x + width - summary_x);
  if (losses.empty()) {
    grid.text(spark_x, y + 1, "- (not recorded)", Style::kDim);
    return;
  }
  draw_cells(grid, spark_x, y + 1, sparkline(losses, glyphs.levels, Style::kGood));
  const int loss_x = spark_x + static_cast<int>(losses.size()) + 1;
  grid.text(loss_x, y + 1,
            fmt::format("{:.4g} (step {}: {:.4g})", *last_loss, first_loss_step, *first_loss),
            Style::kNormal, x + width - loss_x);
}

}  // namespace

Style memory_style(size_t category) {
  return static_cast<Style>(static_cast<size_t>(Style::kMemParams) + category);
}

int overview_height(const ViewModel& model, const UiState& state) {
  int shown = 0;
  for (const RankStatus& row : model.ranks) shown += rank_shown(state, row.rank) ? 1 : 0;
  return 2 + shown + kFooterRows;  // title, header, rows, history and legend
}

void render_overview(const ViewModel& model, const UiState& state, const Glyphs& glyphs,
                     ScreenGrid& grid, Rect area) {
  const Columns c = columns(area.width);
  std::vector<const RankStatus*> rows;
  for (const RankStatus& row : model.ranks) {
    if (rank_shown(state, row.rank)) rows.push_back(&row);
  }
  int y = area.y;
  std::string title = fmt::format("Overview: {} of {} ranks", rows.size(),
                                  std::max<size_t>(model.ranks.size(), static_cast<size_t>(model.world_size)));
  if (const std::optional<int> straggler = model.analysis.straggler()) {
    title += fmt::format(", straggler: rank {}", *straggler);
  }
  grid.text(area.x, y++, title, Style::kBold, area.width);
  grid.text(c.rank, y, "rank", Style::kHeader);
  right(grid, c.step, y, kStepWidth, "step", Style::kHeader);
  right(grid, c.step_time, y, kStepTimeWidth, "step time", Style::kHeader);
  right(grid, c.rate, y, kRateWidth, "tok/s", Style::kHeader);
  grid.text(c.time_bar, y, "last step", Style::kHeader, c.time_bar_width);
  grid.text(c.memory_bar, y, "memory", Style::kHeader, c.memory_bar_width);
  right(grid, c.memory, y, kMemWidth, model.live ? "in use" : "at peak", Style::kHeader);
  grid.text(c.collective, y, "collective", Style::kHeader, kCollectiveWidth);
  right(grid, c.wait, y, kWaitWidth, "waited", Style::kHeader);
  ++y;

  const int legend_rows = kFooterRows;
  const int room = std::max(1, area.y + area.height - y - legend_rows);
  const int first = std::clamp(state.scroll, 0, std::max(0, static_cast<int>(rows.size()) - room));
  const double scale = memory_scale(model, state);
  const bool compute_known = analyzers::compute_recorded(model);
  for (int i = first; i < static_cast<int>(rows.size()) && y < area.y + area.height - legend_rows; ++i) {
    const RankStatus& row = *rows[static_cast<size_t>(i)];
    const bool straggler = model.analysis.straggler() == row.rank;
    right(grid, c.rank, y, kRankWidth, std::to_string(row.rank), straggler ? Style::kWarning : Style::kBold);
    right(grid, c.step, y, kStepWidth, row.step ? std::to_string(*row.step) : "-", Style::kNormal);
    right(grid, c.step_time, y, kStepTimeWidth, row.step ? format_ms(row.step_ns) : "-", Style::kNormal);
    right(grid, c.rate, y, kRateWidth, row.tokens_per_s ? format_count(*row.tokens_per_s) : "-",
          Style::kNormal);
    if (row.breakdown && row.breakdown->window_ns > 0) {
      draw_cells(grid, c.time_bar, y,
                 stacked_bar(time_segments(*row.breakdown, glyphs, compute_known),
                             static_cast<double>(row.breakdown->window_ns), c.time_bar_width));
    }
    const CategoryBytes memory_bytes = shown_memory(model, row);
    const int64_t memory_total = total_bytes(memory_bytes);
    std::vector<Cell> memory_bar = stacked_bar(memory_segments(memory_bytes, glyphs), scale,
                                               c.memory_bar_width);
    if (auto it = model.memory.find(row.rank); it != model.memory.end() && scale > 0 &&
                                                it->second.estimate_total) {
      const auto at = static_cast<size_t>(std::lround(
          static_cast<double>(*it->second.estimate_total) / scale * c.memory_bar_width));
      if (at > 0 && at <= memory_bar.size() && memory_bar[at - 1].ch == U' ') {
        memory_bar[at - 1] = {glyphs.vertical, Style::kEstimate};
      }
    }
    draw_cells(grid, c.memory_bar, y, memory_bar);
    right(grid, c.memory, y, kMemWidth, memory_total > 0 ? format_size(memory_total) : "-",
          Style::kNormal);
    render_collective(model, row, c, grid, y);
    if (straggler) grid.put(c.mark, y, glyphs.straggler, Style::kWarning);
    ++y;
  }
  if (rows.empty()) {
    grid.text(area.x, y++, model.ranks.empty() ? "no rank has recorded anything yet"
                                               : "no rank matches the filter (/ to change it)",
              Style::kDim);
  }
  const int footer = std::min(y + 1, area.y + area.height - kFooterRows + 1);
  render_history(model, glyphs, grid, area.x, footer, area.width);
  render_legend(glyphs, grid, area.x, footer + 3, area.width, compute_known);
}

}  // namespace partrain::tui
