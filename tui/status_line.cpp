// The top line: which run, its status, the step every rank has finished, elapsed time and
// throughput over the latest steps, so a glance says whether the run is alive and how fast it goes.
#include <fmt/format.h>

#include "analyzers/live_hang.h"
#include "tui/units.h"
#include "tui/views.h"

namespace partrain::tui {

void render_status_line(const ViewModel& model, const UiState& state, ScreenGrid& grid, int y) {
  grid.fill_row(y, Style::kStatusBar);
  // What must stay visible at 80 columns comes first (that the screen is paused), and a long
  // run id is cut so that the status, step and data lost still show.
  const std::string prefix = state.paused ? " PAUSED (p resumes) | run " : " run ";
  std::string facts = " | " + model.status;
  facts += model.step ? fmt::format(" | step {}", *model.step) : std::string(" | step -");
  facts += " | " + format_elapsed(model.elapsed_ns);
  if (model.data_loss_events > 0) facts += fmt::format(" | {} events lost", model.data_loss_events);
  // The metrics endpoint's partrain_hang, by the same rule on the trace's timeline.
  if (const analyzers::HangState hang = analyzers::judge_hang_on_timeline(model); hang.hung) {
    facts += hang.diagnosed ? " | hung" : " | looks hung";
    if (hang.culprit) facts += fmt::format(" (rank {})", *hang.culprit);
  }
  const int id_room =
      std::max(8, grid.width() - static_cast<int>(prefix.size()) - static_cast<int>(facts.size()));
  int used = grid.text(0, y, prefix, Style::kStatusBar);
  used += grid.text(used, y, model.run_id.empty() ? "?" : model.run_id, Style::kStatusBar, id_room);
  used += grid.text(used, y, facts, Style::kStatusBar);
  if (model.tokens_per_s) {
    used += grid.text(used, y,
                      fmt::format(" | {} ({})", format_rate(*model.tokens_per_s, "tok/s"),
                                  analyzers::steps_phrase(model.throughput_steps)),
                      Style::kStatusBar);
  }
  // The program's name where the run's facts leave room for it.
  constexpr std::string_view kName = "partrain top ";
  if (used + static_cast<int>(kName.size()) + 2 <= grid.width()) {
    grid.text(grid.width() - static_cast<int>(kName.size()), y, kName, Style::kStatusBar);
  }
}

}  // namespace partrain::tui
