// The whole of `partrain analyze` for one window: runs each analysis, gathers their findings in
// order of impact, and renders the text report and the --json document (docs/analysis.md).
// Each analysis is a section: its text, its JSON under a stable key, and its findings, so adding
// one is a single add_section call in analysis_report.cpp.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "analyzers/analysis_window.h"
#include "analyzers/finding.h"
#include "analyzers/trace_data_loss.h"
#include "core/status.h"
#include "profiler/sqlite_db.h"

namespace partrain::analyzers {

struct ReportSection {
  std::string json_key;  // "ranks", "collectives", "pipeline", "memory", "kernels"
  std::string text;      // the formatted section, ending in a newline
  nlohmann::json json;
};

struct AnalysisReport {
  AnalysisWindow window;
  int64_t started_ns = 0;  // when analyze_run began (monotonic), for -v timings
  // Top-level JSON keys beside the sections' (no text of their own), e.g. collective_matching.
  nlohmann::json extra_json = nlohmann::json::object();
  std::string status;  // runs.status: completed, failed, killed, incomplete, running
  std::string command;
  // A failed run: the rank that failed first and how it ended (the ranks table's exit).
  std::optional<int> failing_rank;
  std::optional<int> failing_exit_code;
  std::optional<int> failing_exit_signal;
  std::vector<DataLossStat> data_loss;  // what the trace says it is missing (header, first)
  // The launcher's flight-recorder diagnosis of a hang or desync (stat collective_diagnosis):
  // the rank it blames (none when it could not tell) and its headline.
  std::optional<std::string> diagnosis;
  std::optional<int> diagnosis_culprit;
  std::vector<ReportSection> sections;
  std::vector<Finding> findings;  // highest impact first
};

StatusOr<AnalysisReport> analyze_run(const profiler::SqliteDb& db, const AnalysisWindow& window);
// The findings every other one may follow from, for analyze and top alike: the launcher's
// diagnosis of a hang or desync (`collective_diagnosis`), the rank that failed first
// (`rank_failed`) and what the trace lost (`trace_data_loss`).
StatusOr<std::vector<Finding>> run_outcome_findings(const profiler::SqliteDb& db);
// One node's file of several read alone first (node_file: what the reader is missing), then
// the diagnosis, the failed rank and lost trace data (every other finding follows from them),
// then by impact, severity, kind and rank (a stable, total order).
void sort_findings(std::vector<Finding>& findings);

// "steps 1..5 (warm-up 1 skipped)", "steps 2..4 (selected)", "whole run (no steps recorded)".
std::string describe_window(const AnalysisWindow& window);
std::string format_report(const AnalysisReport& report);
std::string format_findings(const std::vector<Finding>& findings);
// {"run_id", "status", "world_size", "window": {...}, <section keys>..., "findings": [...]}.
nlohmann::json report_json(const AnalysisReport& report);
nlohmann::json finding_json(const Finding& finding);

}  // namespace partrain::analyzers
