// The analysis report: every analysis of one window as typed results (per-rank breakdown,
// matched collectives, stragglers, pipeline bubble, memory vs estimate, kernels) and their
// findings in order of impact. `partrain analyze` renders it as text and --json
// (docs/analysis.md); the dashboard (`partrain top`, `launch --tui`) shows the same report,
// refreshed on a cost-bounded cadence (analysis_cadence.h).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analyzers/after_last_step.h"
#include "analyzers/analysis_window.h"
#include "analyzers/collective_stats.h"
#include "analyzers/expert_load.h"
#include "analyzers/failure_origin.h"
#include "analyzers/finding.h"
#include "analyzers/gpu_timeline.h"
#include "analyzers/memory_vs_estimate.h"
#include "analyzers/pipeline_bubble.h"
#include "analyzers/stragglers.h"
#include "analyzers/temporal_breakdown.h"
#include "analyzers/top_kernels.h"
#include "analyzers/trace_data_loss.h"
#include "core/status.h"
#include "profiler/trace_reader/step_reads.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

// How the run ended and what its trace says it is missing: what every other finding may follow
// from.
struct RunOutcome {
  std::string status;  // runs.status: completed, failed, killed, incomplete, running
  std::string command;
  // A failed run: the rank that failed first and how it ended (the ranks table's exit).
  std::optional<int> failing_rank;
  std::optional<int> failing_exit_code;
  std::optional<int> failing_exit_signal;
  // Its uncaught Python exception, where it raised one (stat rank_uncaught_exception: the
  // program's line, the library's and the exception).
  std::optional<std::string> failing_exception;
  // Its program had ended when it failed: its atexit found gloo groups alive, whose threads run
  // into the interpreter's shutdown (stat torch_gloo_groups_at_exit, recorded only at exit).
  std::optional<std::string> failing_after_program_ended;
  // The failing rank was read from the ranks' exceptions (or, none raised, from the rank that
  // vanished after its program had ended), not from a launcher that saw the exits (a job under
  // torchrun or mpirun traced with partrain trace).
  bool failing_rank_from_exceptions = false;
  // Read so, a failing rank that raised nothing and vanished (its connection to the collector
  // ended unclean) while every exception is a peer's failure reaching its rank: the lowest of
  // those ranks and its exception.
  std::optional<int> failing_peer_rank;
  std::optional<std::string> failing_peer_exception;
  // Where the failure began when the failing rank only waited (its exception is a peer's
  // failure reaching it): the rank it waited on and how that one stood (failure_origin.h).
  std::optional<FailureOrigin> origin;
  // torchrun restarted the job's workers this many times (stat torchelastic_restart, or the
  // steps' highest attempt): the trace holds that many more attempts, whose steps share their
  // numbers.
  int restarts = 0;
  // The trace stores each step's attempt (schema version 7): false for an older one, whose steps
  // table kept one row per rank and number across attempts.
  bool steps_by_attempt = false;
  std::vector<profiler::StepAttempt> step_attempts;  // the steps each attempt recorded
  // Per rank, the step rows a later row of the same number (and attempt) replaced in the steps
  // table (kept in earlier_step: a step counter that started again; in a trace older than
  // version 7, also a restarted attempt's).
  std::vector<profiler::EarlierSteps> earlier_steps;
  std::vector<DataLossStat> data_loss;  // what the trace says it is missing (header, first)
  // Ranks whose connection to the collector ended without a goodbye (killed, crashed): the
  // events they had not shipped are lost (stat collector_unclean_disconnects).
  std::vector<int> unclean_ranks;
  // The launcher's flight-recorder diagnosis of a hang or desync (stat collective_diagnosis):
  // the rank it blames (none when it could not tell) and its headline.
  std::optional<std::string> diagnosis;
  std::optional<int> diagnosis_culprit;
  // Why the trace has no deferred indexes though its writer closed it (stat
  // trace_indexes_not_built: --trace-max-size reached building them); nothing is missing, reads
  // only scan.
  std::optional<std::string> indexes_not_built;
};

struct AnalysisReport {
  AnalysisWindow window;
  // Over the window's steps, as the dashboard counts its latest ones (step_history.h).
  std::optional<double> tokens_per_s;
  RunOutcome outcome;
  TemporalBreakdown ranks;
  GpuTimelineReport gpu;  // HTA's temporal breakdown of the GPU streams
  CollectiveStatsReport collectives;
  StragglerReport stragglers;
  AfterLastStep after_last_step;  // collectives outside every step window, past the last one
  PipelineBubbleReport pipeline;
  MemoryVsEstimate memory;
  ExpertLoadReport experts;  // mixture-of-experts routing per layer
  TopKernels kernels;
  std::vector<Finding> findings;  // highest impact first
  // When each analysis was done, in ns since analyze_run began (`partrain -v analyze` prints
  // them): "ranks", "gpu", "collectives", "stragglers", "pipeline", "memory", "experts",
  // "kernels".
  std::vector<std::pair<std::string, int64_t>> done_ns;
};

// Told each analysis as it starts (its name, its number from 1, how many there are), so a
// command can show how far a big trace's analysis has got.
using AnalysisProgress = std::function<void(std::string_view analysis, int number, int count)>;

// The exposed communication a straggler causes is the others waiting for it: the
// exposed_communication finding says how much, points at the straggler first, and keeps as its
// impact what remains without the waiting.
void account_for_the_straggler(const StragglerReport& stragglers, std::vector<Finding>& findings);

// A failed run whose first failure is a rank that hit another rank's desync (Gloo aborts on the
// mismatched sizes in whichever rank meets it first): rank_failed's advice points at the desync's
// rank, or at the desync itself where no majority names one.
void follow_the_desync(std::vector<Finding>& findings);

StatusOr<AnalysisReport> analyze_run(const profiler::TraceReader& reader,
                                     const AnalysisWindow& window,
                                     const AnalysisProgress& progress = {});
StatusOr<RunOutcome> read_run_outcome(const profiler::TraceReader& reader);
// The launcher's reading of the ranks' flight-recorder dumps (a hang: the rank that never
// reached a collective; a desync: the rank that issued another one), as it printed it: the
// row of the highest rank, the run's own last. Sets out.diagnosis and out.diagnosis_culprit.
void read_diagnosis(const std::vector<profiler::StatRow>& stats, RunOutcome& out);
// The findings every other one may follow from: the launcher's diagnosis of a hang or desync
// (`collective_diagnosis`), the rank that failed first (`rank_failed`) and what the trace lost
// (`trace_data_loss`).
std::vector<Finding> run_outcome_findings(const RunOutcome& outcome);
// One node's file of several read alone first (node_file: what the reader is missing), then
// the diagnosis, the failed rank and lost trace data (every other finding follows from them),
// then by impact, severity, kind and rank (a stable, total order).
void sort_findings(std::vector<Finding>& findings);

// "steps 1..5 (warm-up 1 skipped)", "steps 2..4 (selected)", "whole run (no steps recorded)".
std::string describe_window(const AnalysisWindow& window);
std::string format_report(const AnalysisReport& report);
std::string format_findings(const std::vector<Finding>& findings);
// {"run_id", "status", "world_size", "window": {...}, "ranks", "gpu", "collectives",
//  "collective_matching", "stragglers", "after_last_step", "pipeline", "memory", "experts",
//  "kernels",
//  "findings": [...]}.
nlohmann::json report_json(const AnalysisReport& report);
nlohmann::json finding_json(const Finding& finding);

}  // namespace partrain::analyzers
