// The findings: what `partrain analyze` would say about the run so far, highest impact first,
// each with its severity, evidence and what to try, wrapped to the width and scrollable.
#include <fmt/format.h>

#include <algorithm>

#include "tui/text_wrap.h"
#include "tui/units.h"
#include "tui/views.h"

namespace partrain::tui {
namespace {

struct Line {
  std::string text;
  Style style;
};

void wrap(std::vector<Line>& out, const std::string& prefix, const std::string& text, int width,
          int indent, Style style) {
  for (std::string& line : wrap_words(prefix, text, width, indent)) {
    out.push_back({std::move(line), style});
  }
}

}  // namespace

void render_findings(const ViewModel& model, const UiState& state, ScreenGrid& grid, Rect area) {
  const LiveAnalysis& a = model.analysis;
  int y = area.y;
  if (!a.available()) {
    grid.text(area.x, y++, "Findings: not yet available", Style::kBold, area.width);
    grid.text(area.x, y, a.note.empty() ? "the analyses run once the trace has a step" : a.note,
              Style::kDim, area.width);
    return;
  }
  grid.text(area.x, y++,
            fmt::format("Findings: {}, {}, computed in {}", a.findings().size(), a.note,
                        format_ms(a.computed_ns)),
            Style::kBold, area.width);
  std::vector<Line> lines;
  int shown = 0;
  for (const analyzers::Finding& f : a.findings()) {
    if (f.rank && !rank_shown(state, *f.rank)) continue;
    ++shown;
    const Style style = f.severity == analyzers::Severity::kCritical  ? Style::kCritical
                        : f.severity == analyzers::Severity::kWarning ? Style::kWarning
                                                                       : Style::kNormal;
    lines.push_back({fmt::format("{}. [{}] {}{} (impact {:.0f}%)", shown,
                                 analyzers::severity_name(f.severity), f.kind,
                                 f.rank ? fmt::format(" (rank {})", *f.rank) : std::string(),
                                 100 * f.impact),
                     style});
    wrap(lines, "   ", f.evidence, area.width, 3, Style::kNormal);
    wrap(lines, "   try: ", f.advice, area.width, 8, Style::kDim);
  }
  if (lines.empty()) lines.push_back({"no findings: nothing stands out", Style::kGood});
  const int room = area.y + area.height - y;
  const int first = std::clamp(state.scroll, 0, std::max(0, static_cast<int>(lines.size()) - room));
  for (int i = first; i < static_cast<int>(lines.size()) && y < area.y + area.height; ++i) {
    grid.text(area.x, y++, lines[static_cast<size_t>(i)].text, lines[static_cast<size_t>(i)].style,
              area.width);
  }
}

}  // namespace partrain::tui
