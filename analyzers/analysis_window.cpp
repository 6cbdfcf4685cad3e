// choose_window: which ranks and steps an analysis covers, and where those steps lie on each
// rank's timeline. Reads the run row, the ranks and the steps through the trace reader; never
// more than one row per rank or step in memory.
#include "analyzers/analysis_window.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>

#include "core/rank_list.h"
#include "profiler/chrome_export.h"
#include "profiler/trace_reader/step_reads.h"

namespace partrain::analyzers {
namespace {

using profiler::TraceReader;

Status read_run(const TraceReader& reader, AnalysisWindow& window) {
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> run, reader.run());
  if (run) {
    window.run_id = run->run_id;
    window.world_size = run->world_size.value_or(0);
  }
  return Status::ok();
}
StatusOr<std::vector<int>> select_ranks(const std::vector<int>& present,
                                        const std::vector<int>& wanted) {
  if (present.empty() && !wanted.empty()) {
    return invalid_argument("--rank {}: the trace has no ranks", wanted.front());
  }
  if (wanted.empty()) return present;  // none: analyze says that no process became a rank
  std::vector<int> chosen = wanted;
  std::sort(chosen.begin(), chosen.end());
  chosen.erase(std::unique(chosen.begin(), chosen.end()), chosen.end());
  for (int rank : chosen) {
    if (!std::binary_search(present.begin(), present.end(), rank)) {
      return invalid_argument("--rank {}: the trace has ranks {}", rank, format_rank_list(present));
    }
  }
  return chosen;
}

// The selection as the user wrote it: "5:" is "5:", not the window it was narrowed to ("5:4").
std::string selection_text(const StepSelection& steps) {
  const auto number = [](const std::optional<int64_t>& n) {
    return n ? std::to_string(*n) : std::string();
  };
  if (steps.first && steps.first == steps.last) return number(steps.first);
  return fmt::format("{}:{}", number(steps.first), number(steps.last));
}

// Fills first_step/last_step/skipped_steps from an explicit selection or by skipping warm-up.
Status select_steps(const std::vector<int64_t>& recorded, const WindowOptions& options,
                    AnalysisWindow& window) {
  const int64_t lowest = recorded.front(), highest = recorded.back();
  if (options.steps) {
    const int64_t first = options.steps->first.value_or(lowest);
    const int64_t last = options.steps->last.value_or(highest);
    auto inside = std::lower_bound(recorded.begin(), recorded.end(), first);
    if (first > last || inside == recorded.end() || *inside > last) {
      return invalid_argument("--steps '{}': the trace has steps {}..{} ({} steps)",
                              selection_text(*options.steps), lowest, highest, recorded.size());
    }
    window.first_step = *inside;
    window.last_step = *(std::upper_bound(recorded.begin(), recorded.end(), last) - 1);
    window.steps_selected = true;
    return Status::ok();
  }
  if (options.skip_steps < 0) {
    return invalid_argument("--skip-steps {}: give a number of warm-up steps, 0 or more",
                            options.skip_steps);
  }
  const int skip = options.skip_is_default && recorded.size() == 1 ? 0 : options.skip_steps;
  if (static_cast<size_t>(skip) >= recorded.size()) {
    return invalid_argument(
        "--skip-steps {} leaves none of the {} steps ({}..{}): skip fewer (--skip-steps 0 keeps "
        "them all) or record more steps",
        options.skip_steps, recorded.size(), lowest, highest);
  }
  window.first_step = recorded[static_cast<size_t>(skip)];
  window.last_step = highest;
  window.skipped_steps = skip;
  window.warm_up_only = skip < options.skip_steps;
  return Status::ok();
}

StatusOr<RankSpan> steps_span(const TraceReader& reader, int rank, int64_t first, int64_t last) {
  ASSIGN_OR_RETURN(const profiler::StepSpan span, profiler::step_span(reader, rank, first, last));
  return RankSpan{span.start_ns, span.end_ns, span.steps};
}

// An explicit --steps window in which none of the selected ranks recorded a step: refused (an
// empty report would read as a clean one), naming the steps they did record.
Status check_selected_ranks_have_steps(const TraceReader& reader, const StepSelection& selection,
                                       const AnalysisWindow& window) {
  if (std::any_of(window.spans.begin(), window.spans.end(),
                  [](const auto& entry) { return entry.second.steps > 0; })) {
    return Status::ok();
  }
  // The error's detail only: what each selected rank did record.
  int64_t lowest = std::numeric_limits<int64_t>::max(),
          highest = std::numeric_limits<int64_t>::min();
  for (const auto& [rank, span] : window.spans) {
    ASSIGN_OR_RETURN(const auto numbers, profiler::step_numbers(reader, rank));
    if (numbers) {
      lowest = std::min(lowest, numbers->first);
      highest = std::max(highest, numbers->second);
    }
  }
  const std::string recorded = lowest <= highest
                                   ? fmt::format("they recorded steps {}..{}", lowest, highest)
                                   : std::string("they recorded no steps at all");
  return invalid_argument(
      "--steps '{}': rank(s) {} recorded no step in it ({}); choose steps "
      "they recorded, or other ranks with --rank",
      selection_text(selection), fmt::join(window.ranks, ","), recorded);
}

// First to last event of a rank without steps: slices (collectives are slices) and memory samples.
StatusOr<RankSpan> events_span(const TraceReader& reader, int rank) {
  ASSIGN_OR_RETURN(const std::optional<profiler::EventSpan> events,
                   profiler::event_span(reader, rank));
  if (!events) return RankSpan{};
  return RankSpan{events->start_ns, events->end_ns, 0};
}

// A rank with nothing in the window (it died early, or records no steps) gets the window of the
// others, so its time reads as idle rather than vanishing.
void fill_empty_spans(AnalysisWindow& window) {
  int64_t start = std::numeric_limits<int64_t>::max(), end = std::numeric_limits<int64_t>::min();
  for (const auto& [rank, span] : window.spans) {
    if (span.duration_ns() <= 0 && span.steps == 0) continue;
    start = std::min(start, span.start_ns);
    end = std::max(end, span.end_ns);
  }
  if (start > end) start = end = 0;
  for (auto& [rank, span] : window.spans) {
    if (span.duration_ns() <= 0 && span.steps == 0) span = {start, end, 0};
  }
  window.start_ns = start;
  window.end_ns = end;
}

}  // namespace

StatusOr<AnalysisWindow> choose_window(const TraceReader& reader, const WindowOptions& options) {
  AnalysisWindow window;
  RETURN_IF_ERROR(read_run(reader, window));
  ASSIGN_OR_RETURN(const std::vector<int> present, reader.recorded_ranks());
  // A traced program that did not say (no WORLD_SIZE): the ranks it recorded, as export says.
  if (window.world_size <= 0) window.world_size = static_cast<int>(present.size());
  ASSIGN_OR_RETURN(window.ranks, select_ranks(present, options.ranks));
  window.ranks_selected = !options.ranks.empty();
  ASSIGN_OR_RETURN(const std::vector<int64_t> steps, profiler::recorded_steps(reader));
  window.has_steps = !steps.empty();
  if (window.has_steps) {
    RETURN_IF_ERROR(select_steps(steps, options, window));
    ASSIGN_OR_RETURN(const std::optional<int64_t> earlier_end,
                     profiler::earlier_attempts_end(reader));
    if (earlier_end) window.earlier_attempts_end = *earlier_end;
  }
  if (!window.has_steps && options.steps) {
    return invalid_argument(
        "--steps: the trace records no steps (a PyTorch job's come from its optimizer's step() or "
        "torch.profiler's ProfilerStep#N; another program's from NVTX ranges, --step-marker); "
        "leave --steps out to analyse the whole run");
  }
  for (int rank : window.ranks) {
    if (window.has_steps) {
      ASSIGN_OR_RETURN(window.spans[rank],
                       steps_span(reader, rank, window.first_step, window.last_step));
    } else {
      ASSIGN_OR_RETURN(window.spans[rank], events_span(reader, rank));
    }
  }
  if (window.steps_selected) {
    RETURN_IF_ERROR(check_selected_ranks_have_steps(reader, *options.steps, window));
  }
  fill_empty_spans(window);
  return window;
}

}  // namespace partrain::analyzers
