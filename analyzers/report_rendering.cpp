// Rendering the analysis report: a header naming the run and the window, one section per
// analysis, then the findings ordered by impact, as text and as --json with the same numbers.
#include <fmt/format.h>

#include "analyzers/analysis_report.h"
#include "core/rank_list.h"

namespace partrain::analyzers {

std::string describe_window(const AnalysisWindow& window) {
  if (!window.has_steps) return "whole run (no steps recorded)";
  std::string steps = window.first_step == window.last_step
                          ? fmt::format("step {}", window.first_step)
                          : fmt::format("steps {}..{}", window.first_step, window.last_step);
  if (window.steps_selected) return steps + " (selected)";
  if (window.skipped_steps == 0) return steps + " (no warm-up skipped)";
  return fmt::format("{} (warm-up {} skipped)", steps, window.skipped_steps);
}

std::string format_findings(const std::vector<Finding>& findings) {
  if (findings.empty()) return "Findings: none\n";
  std::string out = "Findings (highest impact first)\n";
  for (size_t i = 0; i < findings.size(); ++i) {
    const Finding& f = findings[i];
    out += fmt::format("{:>2}. [{}] {}{}: {}\n    try: {}\n", i + 1, severity_name(f.severity),
                       f.kind, f.rank ? fmt::format(" (rank {})", *f.rank) : std::string(),
                       f.evidence, f.advice);
  }
  return out;
}

std::string format_report(const AnalysisReport& report) {
  const AnalysisWindow& w = report.window;
  const RunOutcome& outcome = report.outcome;
  std::string out = fmt::format(
      "run {} ({}), world size {}, ranks {}\nwindow: {}, {:.1f} ms{}\n\n",
      w.run_id.empty() ? "?" : w.run_id, outcome.status, w.world_size,
      w.ranks.empty() ? std::string("none") : format_rank_list(w.ranks), describe_window(w),
      static_cast<double>(w.end_ns - w.start_ns) / 1e6,
      report.tokens_per_s ? fmt::format(", {:.0f} tokens/s", *report.tokens_per_s) : "");
  if (!outcome.data_loss.empty()) {
    out = out.substr(0, out.size() - 1) + format_data_loss(outcome.data_loss) + "\n";
  }
  if (outcome.indexes_not_built) {
    out = out.substr(0, out.size() - 1) + "note: " + *outcome.indexes_not_built + "\n\n";
  }
  // A run of many ranks prints the ranks that stand out, and the ones the findings name.
  RankRowOptions rows{.every_rank = w.ranks_selected};
  for (const Finding& finding : report.findings) {
    if (finding.rank) rows.named.insert(*finding.rank);
  }
  // One section per analysis, in the order analyze_run runs them; GPU time only where there is.
  out += format_temporal_breakdown(report.ranks, rows) + "\n";
  if (const std::string gpu = format_gpu_timeline(report.gpu, rows); !gpu.empty()) {
    out += gpu + "\n";
  }
  for (const std::string& section :
       {format_collective_stats(report.collectives), format_stragglers(report.stragglers, rows),
        format_pipeline_bubble(report.pipeline), format_memory_vs_estimate(report.memory)}) {
    out += section + "\n";
  }
  // A dense run has no expert section.
  if (const std::string experts = format_expert_load(report.experts); !experts.empty()) {
    out += experts + "\n";
  }
  out += format_top_kernels(report.kernels) + "\n";
  return out + format_findings(report.findings);
}

nlohmann::json finding_json(const Finding& finding) {
  return {{"kind", finding.kind},
          {"severity", std::string(severity_name(finding.severity))},
          {"rank", finding.rank ? nlohmann::json(*finding.rank) : nlohmann::json(nullptr)},
          {"impact_pct", 100 * finding.impact},
          {"evidence", finding.evidence},
          {"advice", finding.advice}};
}

nlohmann::json report_json(const AnalysisReport& report) {
  const AnalysisWindow& w = report.window;
  nlohmann::json window = {{"has_steps", w.has_steps},
                           {"ranks", w.ranks},
                           {"skipped_steps", w.skipped_steps},
                           {"description", describe_window(w)},
                           {"duration_ms", static_cast<double>(w.end_ns - w.start_ns) / 1e6}};
  window["first_step"] = w.has_steps ? nlohmann::json(w.first_step) : nlohmann::json(nullptr);
  window["last_step"] = w.has_steps ? nlohmann::json(w.last_step) : nlohmann::json(nullptr);
  window["tokens_per_s"] =
      report.tokens_per_s ? nlohmann::json(*report.tokens_per_s) : nlohmann::json(nullptr);
  nlohmann::json out = {{"run_id", w.run_id},   {"status", report.outcome.status},
                        {"world_size", w.world_size}, {"command", report.outcome.command},
                        {"window", window}};
  out["data_loss"] = data_loss_json(report.outcome.data_loss);
  out["indexes_not_built"] = report.outcome.indexes_not_built
                                 ? nlohmann::json(*report.outcome.indexes_not_built)
                                 : nlohmann::json(nullptr);
  out["ranks"] = temporal_breakdown_json(report.ranks);
  out["gpu"] = gpu_timeline_json(report.gpu);
  out["collectives"] = collective_stats_json(report.collectives);
  out["collective_matching"] = collective_matching_json(report.collectives);
  out["stragglers"] = stragglers_json(report.stragglers);
  out["after_last_step"] = after_last_step_json(report.after_last_step);
  out["pipeline"] = pipeline_bubble_json(report.pipeline);
  out["memory"] = memory_vs_estimate_json(report.memory);
  out["experts"] = expert_load_json(report.experts);
  out["kernels"] = top_kernels_json(report.kernels);
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& finding : report.findings) findings.push_back(finding_json(finding));
  out["findings"] = findings;
  return out;
}

}  // namespace partrain::analyzers
