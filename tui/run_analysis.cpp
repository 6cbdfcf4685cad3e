#include "tui/run_analysis.h"

#include <fmt/format.h>

#include <algorithm>

#include "analyzers/analysis_report.h"
#include "analyzers/analysis_window.h"
#include "analyzers/collective_groups.h"
#include "analyzers/memory_vs_estimate.h"
#include "analyzers/node_file_check.h"
#include "analyzers/pipeline_bubble.h"
#include "analyzers/stragglers.h"
#include "analyzers/temporal_breakdown.h"
#include "analyzers/top_kernels.h"
#include "core/clock.h"

namespace partrain::tui {
namespace {

template <typename Report, typename Findings>
void add_findings(std::vector<analyzers::Finding>& out, const Report& report, Findings findings) {
  for (analyzers::Finding& f : findings(report)) out.push_back(std::move(f));
}

}  // namespace

bool AnalysisCadence::due(int64_t now_ns) const {
  if (!last_end_ns_) return true;
  if (!changed_) return false;
  return now_ns - *last_end_ns_ >= std::max(kMinIntervalNs, kCostFactor * last_cost_ns_);
}

void AnalysisCadence::ran(int64_t started_ns, int64_t finished_ns) {
  last_end_ns_ = finished_ns;
  last_cost_ns_ = finished_ns - started_ns;
  changed_ = false;
}

// analyze_run's composition (analyzers/analysis_report.cpp), kept here for the typed results the
// views need (the straggler, the statistics rows) rather than its text and JSON.
Status analyze_for_dashboard(const profiler::SqliteDb& db, AnalysisSummary& out) {
  const int64_t started = monotonic_ns();
  // `partrain analyze`'s default: the first step is warm-up, unless it is the only one (a young
  // run: analyse it rather than nothing).
  analyzers::WindowOptions options;
  options.skip_is_default = true;
  StatusOr<analyzers::AnalysisWindow> window = analyzers::choose_window(db, options);
  if (!window.is_ok()) {
    if (window.status().code() != StatusCode::kInvalidArgument) return window.status();
    out = AnalysisSummary{};
    out.note = "no steps to analyse yet";
    return Status::ok();
  }
  AnalysisSummary summary;
  ASSIGN_OR_RETURN(summary.findings, analyzers::run_outcome_findings(db));
  ASSIGN_OR_RETURN(const analyzers::TemporalBreakdown temporal,
                   analyzers::analyze_temporal_breakdown(db, *window));
  add_findings(summary.findings, temporal, analyzers::temporal_findings);

  ASSIGN_OR_RETURN(const bool ended, analyzers::run_has_ended(db));
  analyzers::CollectiveStatsPass stats(ended);
  analyzers::StragglerPass stragglers;
  RETURN_IF_ERROR(analyzers::for_each_collective_group(
      db, *window, analyzers::visit_all({stats.visitor(), stragglers.visitor()})));
  const analyzers::CollectiveStatsReport collectives = stats.finish();
  add_findings(summary.findings, collectives, analyzers::collective_stats_findings);
  summary.collective_rows = collectives.rows;
  ASSIGN_OR_RETURN(const analyzers::StragglerReport straggler, stragglers.finish(db, *window));
  add_findings(summary.findings, straggler, analyzers::straggler_findings);
  summary.straggler = straggler.straggler;

  ASSIGN_OR_RETURN(const analyzers::PipelineBubbleReport pipeline,
                   analyzers::analyze_pipeline_bubble(db, *window));
  add_findings(summary.findings, pipeline, analyzers::pipeline_bubble_findings);
  ASSIGN_OR_RETURN(const analyzers::MemoryVsEstimate memory,
                   analyzers::analyze_memory_vs_estimate(db, *window));
  add_findings(summary.findings, memory, analyzers::memory_vs_estimate_findings);
  ASSIGN_OR_RETURN(const analyzers::TopKernels kernels, analyzers::analyze_top_kernels(db, *window));
  add_findings(summary.findings, kernels, analyzers::top_kernels_findings);
  RETURN_IF_ERROR(analyzers::add_node_file_finding(db, summary.findings));
  analyzers::sort_findings(summary.findings);

  summary.available = true;
  summary.computed_ns = monotonic_ns() - started;
  summary.note = analyzers::describe_window(*window);
  out = std::move(summary);
  return Status::ok();
}

}  // namespace partrain::tui
