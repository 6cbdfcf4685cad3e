// The top line: which run, its status, the step every rank has finished, elapsed time and
// throughput over the latest steps, so a glance says whether the run is alive and how fast it goes.
#include <fmt/format.h>

#include "tui/units.h"
#include "tui/views.h"

namespace partrain::tui {

void render_status_line(const ViewModel& model, const UiState& state, ScreenGrid& grid, int y) {
  grid.fill_row(y, Style::kStatusBar);
  std::string line = fmt::format(" run {} | {}", model.run_id.empty() ? "?" : model.run_id,
                                 model.status);
  line += model.step ? fmt::format(" | step {}", *model.step) : std::string(" | step -");
  line += " | " + format_elapsed(model.elapsed_ns);
  if (model.tokens_per_s) {
    line += fmt::format(" | {} ({})", format_rate(*model.tokens_per_s, "tok/s"),
                        analyzers::steps_phrase(model.throughput_steps));
  }
  if (model.data_loss_events > 0) line += fmt::format(" | {} events lost", model.data_loss_events);
  if (state.paused) line += " | PAUSED (p resumes)";
  const int used = grid.text(0, y, line, Style::kStatusBar);
  // The program's name where the run's facts leave room for it.
  constexpr std::string_view kName = "partrain top ";
  if (used + static_cast<int>(kName.size()) + 2 <= grid.width()) {
    grid.text(grid.width() - static_cast<int>(kName.size()), y, kName, Style::kStatusBar);
  }
}

}  // namespace partrain::tui
