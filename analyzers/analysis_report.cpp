// analyze_run and the rendering of its report: a header naming the run and the window, one
// section per analysis, then the findings ordered by impact. Text and JSON carry the same numbers.
#include "analyzers/analysis_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "analyzers/collective_groups.h"
#include "analyzers/collective_stats.h"
#include "analyzers/memory_vs_estimate.h"
#include "analyzers/node_file_check.h"
#include "analyzers/pipeline_bubble.h"
#include "analyzers/stragglers.h"
#include "analyzers/temporal_breakdown.h"
#include "analyzers/top_kernels.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/subprocess.h"
#include "profiler/chrome_export.h"

namespace partrain::analyzers {
namespace {

using profiler::SqliteStatement;

// Runs one analysis and files its text, JSON and findings under `json_key`.
template <typename Report, typename Findings, typename Format, typename Json>
Status add_section(AnalysisReport& out, std::string json_key, StatusOr<Report> report,
                   Findings findings, Format format, Json json) {
  log::debug("analysis section {} done at {:.2f} s", json_key,
             static_cast<double>(monotonic_ns() - out.started_ns) / 1e9);
  if (!report.is_ok()) return report.status().with_context(json_key);
  for (Finding& finding : findings(*report)) out.findings.push_back(std::move(finding));
  out.sections.push_back({std::move(json_key), format(*report), json(*report)});
  return Status::ok();
}

Status read_run_row(const profiler::SqliteDb& db, AnalysisReport& out) {
  ASSIGN_OR_RETURN(auto stmt, SqliteStatement::prepare(
                                  db,
                                  // Under an outer `partrain trace`, the launcher's root cause
                                  // comes as a stat (runner/launch/node_trace.h).
                                  "WITH f AS (SELECT coalesce(r.failing_rank, (SELECT min(rank) "
                                  "FROM stats WHERE name = 'launch_failing_rank')) AS rank "
                                  "FROM runs r) "
                                  "SELECT r.status, r.command, f.rank, k.exit_code, "
                                  "k.exit_signal FROM runs r, f LEFT JOIN ranks k "
                                  "ON k.rank = f.rank"));
  if (stmt.step() == SQLITE_ROW) {
    out.status = stmt.column_is_null(0) ? "unknown" : stmt.column_text(0);
    out.command = stmt.column_is_null(1) ? "" : stmt.column_text(1);
    auto optional_int = [&](int column) -> std::optional<int> {
      if (stmt.column_is_null(column)) return std::nullopt;
      return static_cast<int>(stmt.column_int(column));
    };
    out.failing_rank = optional_int(2);
    out.failing_exit_code = optional_int(3);
    out.failing_exit_signal = optional_int(4);
  }
  return Status::ok();
}

// A failed run's first failure is the finding every other one may follow from: the ranks the
// launcher stopped after it end their records early, and collectives they never reached look
// missing.
std::optional<Finding> rank_failed_finding(const AnalysisReport& report) {
  if (report.status != "failed" || !report.failing_rank) return std::nullopt;
  const int rank = *report.failing_rank;
  std::string how = "failed";
  if (report.failing_exit_signal.value_or(0) != 0) {
    how = fmt::format("was killed by signal {} ({})", *report.failing_exit_signal,
                      signal_name(*report.failing_exit_signal));
  } else if (report.failing_exit_code) {
    how = fmt::format("exited with code {}", *report.failing_exit_code);
  }
  Finding finding;
  finding.kind = "rank_failed";
  finding.severity = Severity::kCritical;
  finding.rank = rank;
  finding.impact = 1;
  finding.evidence = fmt::format(
      "the run failed: rank {} {} first, and the launcher stopped the others", rank, how);
  if (report.diagnosis_culprit && *report.diagnosis_culprit != rank) {
    // A watchdog fires in the ranks left waiting: the first to exit is not the cause.
    finding.advice = fmt::format(
        "rank {}'s exit followed from rank {}, which the collective diagnosis above blames: start "
        "from rank {}",
        rank, *report.diagnosis_culprit, *report.diagnosis_culprit);
    return finding;
  }
  finding.advice = fmt::format(
      "start from rank {}: its last output (the launcher's failure summary, or --log-dir) and its "
      "flight-recorder dump; collectives the other ranks did not record after it failed follow "
      "from it",
      rank);
  return finding;
}

// The launcher's reading of the ranks' flight-recorder dumps (a hang: the rank that never
// reached a collective; a desync: the rank that issued another one), as it printed it.
Status read_diagnosis(const profiler::SqliteDb& db, AnalysisReport& out) {
  ASSIGN_OR_RETURN(auto stmt,
                   SqliteStatement::prepare(db,
                                            "SELECT rank, description FROM stats WHERE name = "
                                            "'collective_diagnosis' ORDER BY rank DESC LIMIT 1"));
  if (stmt.step() == SQLITE_ROW) {
    const int64_t culprit = stmt.column_is_null(0) ? -1 : stmt.column_int(0);
    if (culprit >= 0) out.diagnosis_culprit = static_cast<int>(culprit);
    out.diagnosis = stmt.column_is_null(1) ? "" : stmt.column_text(1);
  }
  return Status::ok();
}

std::optional<Finding> diagnosis_finding(const AnalysisReport& report) {
  if (!report.diagnosis) return std::nullopt;
  Finding finding;
  finding.kind = "collective_diagnosis";
  finding.severity = Severity::kCritical;
  finding.rank = report.diagnosis_culprit;
  finding.impact = 1;
  finding.evidence = fmt::format("the launcher's flight-recorder diagnosis: {}",
                                 report.diagnosis->empty() ? "(no headline)" : *report.diagnosis);
  finding.advice =
      report.diagnosis_culprit
          ? fmt::format(
                "start from rank {}: what it was doing instead of that collective (its "
                "output, its stack: py-spy dump or gdb on a live hang), not from the "
                "ranks whose watchdogs fired while they waited for it",
                *report.diagnosis_culprit)
          : std::string(
                "the dumps did not single out a rank: compare each rank's last "
                "collectives in the launcher's diagnosis (stderr)");
  return finding;
}

// The collective statistics and the straggler analysis from one read of the (comm_id, seq)
// groups: reading them is most of what either costs on a large trace.
Status add_collective_sections(const profiler::SqliteDb& db, const AnalysisWindow& window,
                               AnalysisReport& out) {
  ASSIGN_OR_RETURN(const bool ended, run_has_ended(db));
  CollectiveStatsPass stats(ended);
  StragglerPass stragglers;
  const Status read =
      for_each_collective_group(db, window, visit_all({stats.visitor(), stragglers.visitor()}));
  if (!read.is_ok()) return read.with_context("collectives");
  StatusOr<CollectiveStatsReport> collectives = stats.finish();
  RETURN_IF_ERROR(add_section(out, "collectives", collectives, collective_stats_findings,
                              format_collective_stats, collective_stats_json));
  out.extra_json["collective_matching"] = collective_matching_json(*collectives);
  return add_section(out, "stragglers", stragglers.finish(db, window), straggler_findings,
                     format_stragglers, stragglers_json);
}

}  // namespace

void sort_findings(std::vector<Finding>& findings) {
  auto precedence = [](const Finding& f) {
    return f.kind == "node_file"            ? 0
           : f.kind == "collective_diagnosis" ? 1
           : f.kind == "rank_failed"        ? 2
           : f.kind == "trace_data_loss"    ? 3
                                            : 4;
  };
  std::stable_sort(findings.begin(), findings.end(), [&](const Finding& a, const Finding& b) {
    return std::make_tuple(precedence(a), -a.impact, -static_cast<int>(a.severity), a.kind,
                           a.rank.value_or(-1)) < std::make_tuple(precedence(b), -b.impact,
                                                                  -static_cast<int>(b.severity),
                                                                  b.kind, b.rank.value_or(-1));
  });
}

namespace {

// The run row and the data-loss stats, read once: analyze_run keeps them for its header.
Status read_outcome(const profiler::SqliteDb& db, AnalysisReport& out) {
  RETURN_IF_ERROR(read_run_row(db, out));
  RETURN_IF_ERROR(read_diagnosis(db, out));
  ASSIGN_OR_RETURN(out.data_loss, read_data_loss(db));
  return Status::ok();
}

std::vector<Finding> outcome_findings(const AnalysisReport& run) {
  std::vector<Finding> findings = data_loss_findings(run.data_loss);
  if (std::optional<Finding> failed = rank_failed_finding(run)) {
    findings.insert(findings.begin(), std::move(*failed));
  }
  if (std::optional<Finding> diagnosis = diagnosis_finding(run)) {
    findings.insert(findings.begin(), std::move(*diagnosis));
  }
  return findings;
}

}  // namespace

StatusOr<std::vector<Finding>> run_outcome_findings(const profiler::SqliteDb& db) {
  AnalysisReport run;
  RETURN_IF_ERROR(read_outcome(db, run));
  return outcome_findings(run);
}

StatusOr<AnalysisReport> analyze_run(const profiler::SqliteDb& db, const AnalysisWindow& window) {
  AnalysisReport out;
  out.started_ns = monotonic_ns();
  out.window = window;
  RETURN_IF_ERROR(read_outcome(db, out));
  out.findings = outcome_findings(out);
  RETURN_IF_ERROR(add_section(out, "ranks", analyze_temporal_breakdown(db, window),
                              temporal_findings, format_temporal_breakdown,
                              temporal_breakdown_json));
  RETURN_IF_ERROR(add_collective_sections(db, window, out));
  RETURN_IF_ERROR(add_section(out, "pipeline", analyze_pipeline_bubble(db, window),
                              pipeline_bubble_findings, format_pipeline_bubble,
                              pipeline_bubble_json));
  RETURN_IF_ERROR(add_section(out, "memory", analyze_memory_vs_estimate(db, window),
                              memory_vs_estimate_findings, format_memory_vs_estimate,
                              memory_vs_estimate_json));
  RETURN_IF_ERROR(add_section(out, "kernels", analyze_top_kernels(db, window),
                              top_kernels_findings, format_top_kernels, top_kernels_json));
  RETURN_IF_ERROR(add_node_file_finding(db, out.findings));
  sort_findings(out.findings);
  return out;
}

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
  std::string out = fmt::format(
      "run {} ({}), world size {}, ranks {}\nwindow: {}, {:.1f} ms\n\n",
      w.run_id.empty() ? "?" : w.run_id, report.status, w.world_size,
      profiler::format_rank_ranges(w.ranks), describe_window(w),
      static_cast<double>(w.end_ns - w.start_ns) / 1e6);
  if (!report.data_loss.empty()) {
    out = out.substr(0, out.size() - 1) + format_data_loss(report.data_loss) + "\n";
  }
  for (const ReportSection& section : report.sections) out += section.text + "\n";
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
  nlohmann::json out = {{"run_id", w.run_id},   {"status", report.status},
                        {"world_size", w.world_size}, {"command", report.command},
                        {"window", window}};
  out["data_loss"] = data_loss_json(report.data_loss);
  for (const ReportSection& section : report.sections) out[section.json_key] = section.json;
  for (const auto& [key, value] : report.extra_json.items()) out[key] = value;
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& finding : report.findings) findings.push_back(finding_json(finding));
  out["findings"] = findings;
  return out;
}

}  // namespace partrain::analyzers
