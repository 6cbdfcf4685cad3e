// analyze_run: the window's analyses in turn, their findings gathered and ordered by impact.
// The collective statistics and the stragglers share one read of the (comm_id, seq) groups:
// reading them is most of what either costs on a large trace.
#include "analyzers/analysis_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iterator>
#include <set>
#include <string_view>
#include <tuple>

#include "analyzers/collective_groups.h"
#include "analyzers/failure_origin.h"
#include "analyzers/node_file_check.h"
#include "analyzers/restart_attempts.h"
#include "analyzers/step_history.h"
#include "analyzers/uneven_steps.h"
#include "core/clock.h"
#include "core/rank_list.h"
#include "core/subprocess.h"
#include "profiler/trace_open.h"

namespace partrain::analyzers {
namespace {

// How the failing rank ended: "exited with code 1", "aborted (signal 6, SIGABRT: ...)".
std::string how_it_ended(const RunOutcome& outcome) {
  const int signal = outcome.failing_exit_signal.value_or(0);
  if (signal == SIGABRT) {
    return "aborted (signal 6, SIGABRT: the process's own abort(), as a failed check in the "
           "transport, gloo's enforce on a mismatched collective, or an uncaught C++ exception "
           "does; not a signal from outside)";
  }
  if (signal != 0) return fmt::format("was killed by signal {} ({})", signal, signal_name(signal));
  if (outcome.failing_exit_code) {
    return fmt::format("exited with code {}", *outcome.failing_exit_code);
  }
  return "failed";
}

// The failing rank was stopped by a signal after its program had ended (stat
// torch_gloo_groups_at_exit): where to start, and how to keep its groups from outliving it.
std::string after_program_end_advice(const RunOutcome& outcome, int rank) {
  return fmt::format(
      "{}its exit status was lost to PyTorch's shutdown, as likely under torchrun. Let no gloo "
      "group outlive the program: import torch.distributed.nn (and ZeroRedundancyOptimizer, "
      "ShardedGradScaler) before init_process_group, keep no group in a global, and call "
      "destroy_process_group() at the end",
      outcome.failing_exception
          ? fmt::format("start from rank {}'s exception, which ended its program; ", rank)
          : fmt::format("rank {}'s program ran to its end (what it recorded is whole): ", rank));
}

// The failing rank only waited (its exception is a peer's failure reaching it): what the trace
// says of the rank it waited on (failure_origin.h). The finding names where to start.
void explain_origin(const RunOutcome& outcome, const FailureOrigin& origin, Finding& finding) {
  if (outcome.failing_rank_from_exceptions) {
    finding.evidence = fmt::format(
        "the run failed: rank {}'s uncaught exception says a peer's failure reached it ({}); the "
        "launcher's exits are not in the trace",
        origin.waiter, origin.waiter_exception);
  } else if (outcome.failing_rank != origin.waiter) {
    // The launcher's first failure is the rank waited on, stopped after its program ended
    // (read_run_outcome): the waiter failed after it.
    finding.evidence = fmt::format(
        "the run failed: rank {} {} first, after its program had ended, and rank {}'s uncaught "
        "exception says a peer's failure reached it ({})",
        origin.rank, how_it_ended(outcome), origin.waiter, origin.waiter_exception);
  } else {
    finding.evidence =
        fmt::format("the run failed: rank {} {} first, on a peer's failure reaching it ({})",
                    origin.waiter, how_it_ended(outcome), origin.waiter_exception);
  }
  const std::string waited = fmt::format(
      "rank {} waited in it from {:.1f} s and failed at {:.1f} s{}", origin.waiter,
      origin.awaited_from_s, origin.failed_at_s,
      origin.last_collective_s ? fmt::format("; rank {}'s last collective ended at {:.1f} s",
                                             origin.rank, *origin.last_collective_s)
                               : fmt::format("; rank {} recorded no collective", origin.rank));
  switch (origin.kind) {
    case OriginKind::kEnded:
      finding.rank = origin.rank;
      finding.evidence += fmt::format(
          "; but rank {} {} without entering {}, which rank {} still expected ({}){}", origin.rank,
          origin.exit.empty() ? std::string("ended cleanly (no exception, a goodbye to the "
                                            "collector)")
                              : origin.exit,
          origin.awaited, origin.waiter, waited, origin.after_end);
      finding.advice = fmt::format(
          "start from rank {}: why it ended before the others (a return, break or sys.exit on its "
          "code path, a data loader that ran out of batches first); rank {}'s failure and the "
          "collectives rank {} did not record follow from its exit",
          origin.rank, origin.waiter, origin.rank);
      return;
    case OriginKind::kHung:
      finding.rank = origin.rank;
      finding.evidence += fmt::format(
          "; but rank {} never entered {} ({}): it raised nothing and had no collective in "
          "flight{}",
          origin.rank, origin.awaited, waited,
          origin.exit.empty()
              ? std::string()
              : fmt::format(", and {} after rank {} failed", origin.exit, origin.waiter));
      finding.advice = fmt::format(
          "start from rank {}: what it was doing instead of that collective (its output, its "
          "stack: py-spy dump while it hangs; with --collective-timeout the launcher diagnoses "
          "such a hang as it happens), not from rank {}, which only waited for it",
          origin.rank, origin.waiter);
      return;
    case OriginKind::kRaised:
      finding.rank = origin.rank;
      finding.evidence +=
          fmt::format("; but rank {} raised an exception of its own code ({}) and never entered {}",
                      origin.rank, origin.exception, origin.awaited);
      finding.advice =
          fmt::format("start from rank {}'s exception; rank {}'s failure followed from it",
                      origin.rank, origin.waiter);
      return;
    case OriginKind::kDeadlock:
      finding.evidence += fmt::format(
          "; but ranks {},{} wait on each other: rank {} in {}, which rank {} never entered, and "
          "rank {} in {}, which rank {} never entered: the ranks issue their collectives in "
          "different orders",
          std::min(origin.waiter, origin.rank), std::max(origin.waiter, origin.rank), origin.waiter,
          origin.awaited, origin.rank, origin.rank, origin.own_wait, origin.waiter);
      finding.advice = fmt::format(
          "start from the code that issues these two collectives, on both ranks: every member of "
          "a group must issue its collectives in one order; neither rank alone is the cause "
          "(rank {} failed first only because its wait ran out first)",
          origin.waiter);
      return;
  }
}

// A failed run's first failure is the finding every other one may follow from: the ranks the
// launcher stopped after it end their records early, and collectives they never reached look
// missing. Unless it only waited: then the rank it waited on, where the trace tells.
std::optional<Finding> rank_failed_finding(const RunOutcome& outcome) {
  if (outcome.status != "failed" || !outcome.failing_rank) return std::nullopt;
  const int rank = *outcome.failing_rank;
  Finding finding;
  finding.kind = "rank_failed";
  finding.severity = Severity::kCritical;
  finding.rank = rank;
  finding.impact = 1;
  const bool waited = outcome.failing_exception && reached_from_a_peer(*outcome.failing_exception);
  if (outcome.origin) {
    explain_origin(outcome, *outcome.origin, finding);
  } else if (outcome.failing_rank_from_exceptions && !outcome.failing_exception &&
             outcome.failing_after_program_ended) {
    finding.evidence = fmt::format(
        "the run failed: no rank raised an uncaught exception, and rank {} ended without closing "
        "its connection to the collector (killed or aborted) after its program had ended (its "
        "atexit handlers had run): {}; the launcher's exits are not in the trace",
        rank, *outcome.failing_after_program_ended);
    finding.advice = after_program_end_advice(outcome, rank);
    return finding;
  } else if (outcome.failing_rank_from_exceptions && outcome.failing_peer_exception) {
    finding.evidence = fmt::format(
        "the run failed: rank {} ended without an uncaught exception and without closing its "
        "connection to the collector (killed or aborted: by the OOM killer or a signal from "
        "outside, by its own abort() (SIGABRT, as gloo's enforce does on a mismatched "
        "collective), or by the launcher stopping it after the others failed, which is how a "
        "rank ends that hung while the others timed out waiting for it), while every other "
        "rank's exception says a peer's failure reached it (rank {}'s: {}); the launcher's exits "
        "are not in the trace",
        rank, *outcome.failing_peer_rank, *outcome.failing_peer_exception);
  } else if (outcome.failing_rank_from_exceptions) {
    finding.evidence = fmt::format(
        "the run failed: rank {} raised an uncaught exception ({}); the launcher's exits are not "
        "in the trace, so it is the rank whose exception is not a peer's failure reaching it "
        "(one out of a torch.distributed call, a connection closed or reset by the peer, a "
        "timeout), else the lowest",
        rank, *outcome.failing_exception);
  } else if (outcome.failing_exit_signal.value_or(0) != 0 && outcome.failing_after_program_ended) {
    // Its atexit handlers had run: the program was over, by its end or an uncaught exception.
    finding.evidence = fmt::format(
        "the run failed: rank {} {} first, after its program had ended{} (its atexit handlers "
        "had run): {}",
        rank, how_it_ended(outcome),
        outcome.failing_exception ? " on an uncaught exception (" + *outcome.failing_exception + ")"
                                  : std::string(),
        *outcome.failing_after_program_ended);
    finding.advice = after_program_end_advice(outcome, rank);
    return finding;
  } else {
    finding.evidence = fmt::format(
        "the run failed: rank {} {} first{}, and the launcher stopped the others", rank,
        how_it_ended(outcome),
        outcome.failing_exception ? " on an uncaught exception (" + *outcome.failing_exception + ")"
                                  : std::string());
  }
  if (outcome.diagnosis_culprit && *outcome.diagnosis_culprit != rank) {
    // A watchdog fires in the ranks left waiting: the first to exit is not the cause.
    finding.advice = fmt::format(
        "rank {}'s exit followed from rank {}, which the collective diagnosis above blames: start "
        "from rank {}",
        rank, *outcome.diagnosis_culprit, *outcome.diagnosis_culprit);
  } else if (outcome.diagnosis && !outcome.diagnosis_culprit) {
    // Ranks waiting on each other, or on several roots: no one rank to start from.
    finding.advice = fmt::format(
        "rank {}'s exit followed from what the collective diagnosis above found, which names no "
        "single rank (ranks that wait on each other, or on several): start from the collectives "
        "it names, on every rank it names, not from rank {} alone",
        rank, rank);
  } else if (outcome.origin) {
    // explain_origin's advice.
  } else if (waited) {
    // It only waited, and the trace does not say on whom: the others' records before its
    // failure do, not its failure.
    finding.advice = fmt::format(
        "its exception says a peer's failure reached it: start from the rank it waited on (the "
        "missing_collective findings, the other ranks' output), not from rank {}; its own last "
        "output and flight-recorder dump show what it waited in",
        rank);
  } else {
    finding.advice = fmt::format(
        "start from rank {}: its last output (the launcher's failure summary, or --log-dir) and "
        "its flight-recorder dump; collectives the other ranks did not record after it failed "
        "follow from it",
        rank);
  }
  return finding;
}

std::optional<Finding> diagnosis_finding(const RunOutcome& outcome) {
  if (!outcome.diagnosis) return std::nullopt;
  Finding finding;
  finding.kind = "collective_diagnosis";
  finding.severity = Severity::kCritical;
  finding.rank = outcome.diagnosis_culprit;
  finding.impact = 1;
  finding.evidence = fmt::format("the launcher's flight-recorder diagnosis: {}",
                                 outcome.diagnosis->empty() ? "(no headline)" : *outcome.diagnosis);
  finding.advice =
      outcome.diagnosis_culprit
          ? fmt::format(
                "start from rank {}: what it was doing instead of that collective (its "
                "output, its stack: py-spy dump or gdb on a live hang), not from the "
                "ranks whose watchdogs fired while they waited for it",
                *outcome.diagnosis_culprit)
          : std::string(
                "the dumps did not single out a rank: compare each rank's last "
                "collectives in the launcher's diagnosis (stderr)");
  // torchrun restarted the job after the hang and the last attempt completed: what it
  // diagnosed was an earlier attempt's (a hang ends its attempt with the watchdog's exit).
  if (outcome.restarts > 0 && outcome.status == "completed") {
    finding.severity = Severity::kWarning;
    finding.evidence += fmt::format(
        " (an earlier attempt's: torchrun restarted the job {} time{} and the last attempt "
        "completed)",
        outcome.restarts, outcome.restarts == 1 ? "" : "s");
  }
  return finding;
}

// The launcher's failing rank: the run row's, or under an outer `partrain trace` the stat its
// launcher left (runner/launch/node_trace.h).
std::optional<int> failing_rank(const std::optional<profiler::RunRow>& run,
                                const std::vector<profiler::StatRow>& stats) {
  if (run && run->failing_rank) return run->failing_rank;
  std::optional<int> lowest;
  for (const profiler::StatRow& stat : stats) {
    if (stat.name != "launch_failing_rank" || !stat.rank) continue;
    if (!lowest || *stat.rank < *lowest) lowest = stat.rank;
  }
  return lowest;
}

// A trace in which no process became a rank (a script of one process without
// torch.distributed, `accelerate launch --cpu` running one process, a job stopped before any
// worker set up its group): what makes a process a rank (docs/tracing.md, "Foreign programs").
Finding no_ranks_finding(const RunOutcome& outcome) {
  Finding finding;
  finding.kind = "nothing_recorded";
  finding.severity = Severity::kWarning;
  finding.impact = 1;
  finding.evidence = fmt::format(
      "no process of the run {} a rank (status {}): the trace holds no ranks, so no collectives, "
      "no steps and no compute",
      outcome.status == "running" ? "has become" : "became",
      outcome.status.empty() ? "unknown" : outcome.status);
  finding.advice =
      "partrain records a process as a rank when its launcher gives it one (RANK and WORLD_SIZE "
      "from torchrun, partrain launch, or accelerate launch of several processes; "
      "OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID) or when it acts as one "
      "(torch.distributed.init_process_group, ncclCommInitRank). A program of one process that "
      "does neither is no distributed job: run it under torchrun --nproc-per-node 1, or have it "
      "call init_process_group; a job stopped before any worker set up its group left nothing to "
      "record";
  return finding;
}

// A trace with neither collectives nor steps (a foreign program's processes and nothing else):
// there is nothing to analyse, and saying why beats findings made from process lifetimes.
std::optional<Finding> nothing_recorded_finding(const AnalysisReport& report) {
  if (report.window.ranks.empty()) return no_ranks_finding(report.outcome);
  if (report.window.has_steps || report.collectives.ops > 0 || report.ranks.ranks.empty()) {
    return std::nullopt;
  }
  for (const RankBreakdown& row : report.ranks.ranks) {
    if (row.busy_ns > 0) return std::nullopt;
  }
  Finding finding;
  finding.kind = "nothing_recorded";
  finding.severity = Severity::kWarning;
  finding.impact = 1;
  finding.evidence = fmt::format(
      "the trace holds no collectives, no steps and no compute for its {} rank{}, only the "
      "processes' lifetimes: partrain saw no torch.distributed or NCCL call and no step marker",
      report.ranks.ranks.size(), report.ranks.ranks.size() == 1 ? "" : "s");
  finding.advice =
      "partrain records PyTorch's collectives through ProcessGroup hooks (torch 2.15 or later; "
      "an older torch records NCCL calls only), NCCL calls, and steps from ProfilerStep#N NVTX "
      "ranges or the optimizer's step(). Check that the program initialises torch.distributed; "
      "that its Python keeps partrain's PYTHONPATH entry (not -I, -E or -S, nor a PYTHONPATH "
      "replaced for its workers: docs/pytorch.md, Limits); and the trace's stats "
      "(torch_collectives_unrecorded, torch_recorder_failed) for a recording that gave up";
  return finding;
}

// Files one analysis's result and findings, and when it was done.
template <typename Report, typename Findings>
Status add_analysis(AnalysisReport& out, std::string_view key, int64_t started_ns,
                    StatusOr<Report> result, Report& into, Findings findings) {
  out.done_ns.emplace_back(std::string(key), monotonic_ns() - started_ns);
  if (!result.is_ok()) return result.status().with_context(key);
  into = std::move(result).value();
  for (Finding& finding : findings(into)) out.findings.push_back(std::move(finding));
  return Status::ok();
}

// The collective statistics and the straggler analysis from one pass over the groups.
Status add_collective_analyses(const profiler::TraceReader& reader, int64_t started_ns,
                               AnalysisReport& out) {
  ASSIGN_OR_RETURN(const bool ended, run_has_ended(reader));
  CollectiveStatsPass stats(ended);
  StragglerPass stragglers;
  UnevenStepsPass uneven;
  AfterLastStepPass after_last_step;
  const Status read =
      for_each_collective_group(reader, out.window,
                                visit_all({stats.visitor(), stragglers.visitor(), uneven.visitor(),
                                           after_last_step.visitor()}));
  if (!read.is_ok()) return read.with_context("collectives");
  CollectiveStatsReport collectives = stats.finish();
  ASSIGN_OR_RETURN(collectives.shapes_recorded, run_recorded_shapes(reader));
  forget_earlier_attempts_steps(collectives, out.outcome.restarts);
  StatusOr<std::optional<UnevenSteps>> steps = uneven.finish(reader);
  if (!steps.is_ok()) return steps.status().with_context("uneven steps");
  for (Finding& finding : uneven_steps_findings(*steps)) out.findings.push_back(std::move(finding));
  StatusOr<AfterLastStep> after = after_last_step.finish(reader);
  if (!after.is_ok()) return after.status().with_context("collectives after the last step");
  out.after_last_step = std::move(after).value();
  for (Finding& finding : after_last_step_findings(out.after_last_step)) {
    out.findings.push_back(std::move(finding));
  }
  RETURN_IF_ERROR(add_analysis(out, "collectives", started_ns,
                               StatusOr<CollectiveStatsReport>(std::move(collectives)),
                               out.collectives, [&out](const CollectiveStatsReport& report) {
                                 return collective_findings_by_attempt(report, out.outcome);
                               }));
  const bool compute_known = compute_recorded(out.ranks);  // the breakdown ran first
  return add_analysis(out, "stragglers", started_ns, stragglers.finish(reader, out.window),
                      out.stragglers, [compute_known](const StragglerReport& report) {
                        return straggler_findings(report, compute_known);
                      });
}

}  // namespace

void read_diagnosis(const std::vector<profiler::StatRow>& stats, RunOutcome& out) {
  const profiler::StatRow* chosen = nullptr;
  for (const profiler::StatRow& stat : stats) {
    if (stat.name != "collective_diagnosis") continue;
    if (chosen == nullptr || stat.rank.value_or(-1) > chosen->rank.value_or(-1)) chosen = &stat;
  }
  if (chosen == nullptr) return;
  out.diagnosis_culprit = chosen->rank;
  out.diagnosis = chosen->description;
}

// The exposed communication a straggler causes is the others waiting for it, not the link: the
// exposed_communication finding says how much of it that is and points at the straggler first
// (its "smaller DDP buckets" advice was the wrong way for a rank that sleeps), and its impact is
// what remains once the waiting is gone.
// A rank that aborts in the transport's size check (Gloo's enforce) fails first, but the desync
// it tripped over is another rank's doing: the rank_failed finding points there.
void follow_the_desync(std::vector<Finding>& findings) {
  auto failed = std::find_if(findings.begin(), findings.end(),
                             [](const Finding& f) { return f.kind == "rank_failed"; });
  if (failed == findings.end() || !failed->rank) return;
  // The launcher's flight-recorder diagnosis, from the ranks' dumps, already says where to start.
  const bool diagnosed = std::any_of(findings.begin(), findings.end(), [](const Finding& f) {
    return f.kind == "collective_diagnosis";
  });
  if (diagnosed) return;
  for (const Finding& desync : findings) {
    if (desync.kind != "desync" || desync.rank == failed->rank) continue;
    if (desync.rank) {
      failed->advice = fmt::format(
          "rank {}'s failure followed from the desync below, which rank {} caused (it issued "
          "another collective than its group: a transport aborts on the mismatch, and the first "
          "rank to hit it fails first): start from rank {}",
          *failed->rank, *desync.rank, *desync.rank);
    } else {
      // Two ranks, or an even split: no majority says which side is wrong, but the failure is
      // the mismatch's, not something of the first rank to hit it.
      failed->advice = fmt::format(
          "rank {}'s failure followed from the desync below (its group's members issued "
          "different collectives: a transport aborts on the mismatch, and the first rank to hit "
          "it fails first; no majority says which side is wrong): start from the code paths "
          "that issued the two collectives it names",
          *failed->rank);
    }
    return;
  }
}

void account_for_the_straggler(const StragglerReport& stragglers, std::vector<Finding>& findings) {
  auto exposed = std::find_if(findings.begin(), findings.end(),
                              [](const Finding& f) { return f.kind == "exposed_communication"; });
  if (exposed == findings.end()) return;
  // Who the waiting is for: the straggler, else ranks taking turns (rotating_lateness).
  double share = 0, wait_ms = 0;
  std::string whom, first;
  if (stragglers.straggler) {
    const auto straggler =
        std::find_if(stragglers.ranks.begin(), stragglers.ranks.end(),
                     [&](const RankLateness& r) { return r.rank == *stragglers.straggler; });
    if (straggler == stragglers.ranks.end()) return;
    share = straggler->step_share;
    wait_ms = straggler->wait_per_step_ms;
    whom = fmt::format("waiting for rank {}, the straggler", straggler->rank);
    first = fmt::format("first make rank {} keep up (the straggler finding)", straggler->rank);
  } else if (std::any_of(findings.begin(), findings.end(),
                         [](const Finding& f) { return f.kind == "rotating_lateness"; })) {
    // The union of their waits: DP groups held up together are one wait, not one per group.
    wait_ms = stragglers.wait_per_step_ms;
    share = stragglers.mean_step_ms > 0 ? std::min(wait_ms / stragglers.mean_step_ms, 1.0) : 0.0;
    whom = "waiting for one another, the ranks taking turns to be late";
    first = "first even out what makes a different rank late each step (rotating_lateness)";
  } else {
    return;
  }
  // A part of the exposed time, in ms as in share: never more than the whole.
  const double waiting = std::min(share, exposed->impact);
  const double waiting_ms = share > 0 ? wait_ms * waiting / share : 0.0;
  exposed->evidence += fmt::format(
      "; up to {:.1f} ms per step of it ({:.0f}% of the step) is the other ranks {}, not the "
      "transfers",
      waiting_ms, 100 * waiting, whom);
  exposed->advice = fmt::format("{}: the waiting goes with it; then, for what stays exposed, {}",
                                first, exposed->advice);
  exposed->impact = std::max(0.0, exposed->impact - waiting);
  // The thresholds exposed_communication judges by, on what remains.
  exposed->severity = exposed_communication_severity(exposed->impact);
}

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

// Under a launcher partrain does not run, nothing says which rank failed first but the ranks'
// uncaught exceptions and connections. A rank whose exception rose in its own code comes first,
// then the lowest. When every exception is a peer's failure reaching the rank, the rank that
// ended with no exception and without a goodbye to the collector went first (a SIGKILL, the OOM
// killer: it had no chance to raise; one whose atexit had run carries its at-exit stat, and
// read_run_outcome asks the rank that waited on it); else the lowest rank with an exception.
// When none raised, the lowest rank that vanished so after its program had ended (its atexit
// recorded gloo groups alive) was stopped by a signal in the interpreter's shutdown
// (docs/pytorch.md).
void blame_first_exception(const std::vector<profiler::StatRow>& stats, RunOutcome& out) {
  const profiler::StatRow* chosen = nullptr;
  std::set<int> raised;
  for (const profiler::StatRow& stat : stats) {
    if (stat.name != "rank_uncaught_exception" || !stat.rank) continue;
    raised.insert(*stat.rank);
    const bool peer = reached_from_a_peer(stat.description);
    if (chosen == nullptr ||
        std::make_pair(peer, *stat.rank) <
            std::make_pair(reached_from_a_peer(chosen->description), *chosen->rank)) {
      chosen = &stat;
    }
  }
  const std::set<int> unclean(out.unclean_ranks.begin(), out.unclean_ranks.end());
  if (chosen == nullptr) {
    for (int rank : unclean) {  // lowest first
      std::optional<std::string> at_exit = program_end_stat(stats, rank);
      if (!at_exit) continue;
      out.failing_rank = rank;
      out.failing_rank_from_exceptions = true;
      out.failing_after_program_ended = std::move(at_exit);
      return;
    }
    return;
  }
  out.failing_rank_from_exceptions = true;
  if (reached_from_a_peer(chosen->description)) {
    for (int rank : unclean) {  // lowest first
      if (raised.count(rank) != 0) continue;
      out.failing_rank = rank;
      out.failing_peer_rank = chosen->rank;
      out.failing_peer_exception = chosen->description;
      out.failing_after_program_ended = program_end_stat(stats, rank);
      return;
    }
  }
  out.failing_rank = chosen->rank;
  out.failing_exception = chosen->description;
}

namespace {

// A run its writer left `running` when it died reads as incomplete, as open_trace and the
// dashboard report it, also where the file could not be marked so (read-only here: another
// user's trace, a read-only mount): its status and the loss open_trace would have recorded.
void read_unmarked_incomplete(const profiler::TraceReader& reader, RunOutcome& out) {
  if (out.status != "running") return;
  const std::string file = reader.db().filename();
  if (file.empty() || profiler::writer_alive(file)) return;
  out.status = "incomplete";
  const bool said =
      std::any_of(out.data_loss.begin(), out.data_loss.end(),
                  [](const DataLossStat& loss) { return loss.name == "run_incomplete"; });
  if (said) return;
  out.data_loss.push_back({"run_incomplete", std::nullopt, 1,
                           "the writer stopped without closing the run; events after its last "
                           "commit are lost (the file could not be marked incomplete: it is not "
                           "writable here)"});
}

// The failing rank raised nothing and was stopped after its program had ended (gloo's threads
// abort a process in the interpreter's shutdown; a launcher's SIGTERM lands there): a rank that
// then failed waiting on it, in an op it never entered, says it ended too early. The first
// such rank to raise a peer's failure, and the origin it reads when that names the failing rank.
StatusOr<std::optional<FailureOrigin>> origin_of_a_rank_stopped_after_its_end(
    const profiler::TraceReader& reader, const std::vector<profiler::RankRow>& ranks,
    const std::vector<profiler::StatRow>& stats, const RunOutcome& out) {
  for (const profiler::StatRow& stat : stats) {
    if (stat.name != "rank_uncaught_exception" || !stat.rank || stat.rank == out.failing_rank ||
        !reached_from_a_peer(stat.description)) {
      continue;
    }
    ASSIGN_OR_RETURN(std::optional<FailureOrigin> origin,
                     trace_failure_origin(reader, *stat.rank, stat.description, ranks, stats));
    if (origin && origin->kind == OriginKind::kEnded && origin->rank == *out.failing_rank) {
      return origin;
    }
  }
  return std::optional<FailureOrigin>();
}

}  // namespace

StatusOr<RunOutcome> read_run_outcome(const profiler::TraceReader& reader) {
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> run, reader.run());
  ASSIGN_OR_RETURN(const std::vector<profiler::StatRow> stats, reader.stats());
  RunOutcome out;
  if (run) {
    out.status = run->status ? std::string(profiler::run_status_name(*run->status)) : "unknown";
    out.command = run->command;
    out.failing_rank = failing_rank(run, stats);
  }
  for (const profiler::StatRow& stat : stats) {
    if (stat.name == "collector_unclean_disconnects" && stat.rank && stat.value > 0) {
      out.unclean_ranks.push_back(*stat.rank);
    }
  }
  ASSIGN_OR_RETURN(const std::vector<profiler::RankRow> ranks, reader.ranks());
  if (!out.failing_rank && out.status == "failed") {
    blame_first_exception(stats, out);
  } else if (out.failing_rank) {
    for (const profiler::RankRow& rank : ranks) {
      if (rank.rank != *out.failing_rank) continue;
      out.failing_exit_code = rank.exit_code;
      out.failing_exit_signal = rank.exit_signal;
    }
    for (const profiler::StatRow& stat : stats) {
      if (stat.name == "rank_uncaught_exception" && stat.rank == out.failing_rank) {
        out.failing_exception = stat.description;
      }
    }
    out.failing_after_program_ended = program_end_stat(stats, *out.failing_rank);
  }
  if (out.status == "failed" && out.failing_rank && out.failing_exception) {
    ASSIGN_OR_RETURN(out.origin, trace_failure_origin(reader, *out.failing_rank,
                                                      *out.failing_exception, ranks, stats));
  } else if (out.status == "failed" && out.failing_rank && out.failing_after_program_ended) {
    ASSIGN_OR_RETURN(out.origin, origin_of_a_rank_stopped_after_its_end(reader, ranks, stats, out));
  }
  read_diagnosis(stats, out);
  for (const profiler::StatRow& stat : stats) {
    int attempt = 0;
    if (stat.name == "torchelastic_restart" &&
        std::sscanf(stat.description.c_str(), "attempt %d", &attempt) == 1) {
      out.restarts = std::max(out.restarts, attempt);
    }
    if (stat.name == "trace_indexes_not_built") out.indexes_not_built = stat.description;
  }
  ASSIGN_OR_RETURN(out.data_loss, read_data_loss(reader));
  read_unmarked_incomplete(reader, out);
  ASSIGN_OR_RETURN(out.earlier_steps, profiler::earlier_steps(reader));
  out.steps_by_attempt = profiler::stores_step_attempts(reader);
  ASSIGN_OR_RETURN(out.step_attempts, profiler::step_attempts(reader));
  // A restarted job traced without partrain_torch (no stat) still has its attempts' steps.
  if (!out.step_attempts.empty()) {
    out.restarts = std::max(out.restarts, out.step_attempts.back().attempt);
  }
  return out;
}

// "12 step rows of ranks 0,1 (steps 0-5)": the replaced rows the earlier_steps view holds.
std::string earlier_steps_text(const std::vector<profiler::EarlierSteps>& earlier) {
  int64_t rows = 0;
  int64_t first = earlier.front().first_step;
  int64_t last = earlier.front().last_step;
  std::vector<int> ranks;
  for (const profiler::EarlierSteps& rank : earlier) {
    rows += rank.rows;
    first = std::min(first, rank.first_step);
    last = std::max(last, rank.last_step);
    ranks.push_back(rank.rank);
  }
  return fmt::format("{} step row{} of {} (step{} {})", rows, rows == 1 ? "" : "s",
                     ranks_phrase(ranks), first == last ? "" : "s",
                     first == last ? std::to_string(first) : fmt::format("{}-{}", first, last));
}

// "attempt 0 steps 0-9, attempt 1 steps 0-4": what each attempt recorded.
std::string step_attempts_text(const std::vector<profiler::StepAttempt>& attempts) {
  std::vector<std::string> parts;
  for (const profiler::StepAttempt& a : attempts) {
    parts.push_back(
        fmt::format("attempt {} step{} {}", a.attempt, a.first_step == a.last_step ? "" : "s",
                    a.first_step == a.last_step ? std::to_string(a.first_step)
                                                : fmt::format("{}-{}", a.first_step, a.last_step)));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The finding of a trace older than schema version 7: its steps table kept one row per rank and
// step number across attempts (docs/decisions.md "A restarted job's steps table keeps each
// rank's latest step of a number"), so step figures may mix attempts.
Finding restarted_without_attempts_finding(const RunOutcome& outcome) {
  Finding finding;
  finding.kind = "job_restarted";
  finding.severity = Severity::kWarning;
  finding.impact = 1;
  const std::string kept =
      outcome.earlier_steps.empty()
          ? std::string("")
          : fmt::format(" (the replaced rows are kept in the earlier_steps view: {})",
                        earlier_steps_text(outcome.earlier_steps));
  finding.evidence = fmt::format(
      "torchrun restarted the job's workers {} time{} (--max-restarts): each attempt's "
      "collectives are on groups of their own (comm ids ending @restartN), but this trace (schema "
      "older than 7) keeps one step row per rank and step number: a later attempt's step replaced "
      "an earlier attempt's of the same number{}, and an earlier attempt's steps stay where no "
      "later attempt recorded that number (steps it did not reach, a rank that did not come "
      "back), so step times may mix attempts; every attempt's steps stay in the timeline as step "
      "slices (export)",
      outcome.restarts, outcome.restarts == 1 ? "" : "s", kept);
  finding.advice =
      "read the collectives of one attempt by its comm ids, and an earlier attempt's step times "
      "in the trace's earlier_steps view (docs/trace-format.md); a trace recorded by this "
      "partrain keeps each attempt's steps apart and analyses the last";
  return finding;
}

// torchrun restarted the workers: each attempt's groups are named apart (...@restartN) and its
// steps are stored under its attempt; the analysis window is the last attempt's steps
// (profiler/trace_reader/step_reads.h), which the finding names.
std::optional<Finding> restarted_finding(const RunOutcome& outcome) {
  if (outcome.restarts == 0) return std::nullopt;
  if (!outcome.steps_by_attempt) return restarted_without_attempts_finding(outcome);
  Finding finding;
  finding.kind = "job_restarted";
  finding.severity = Severity::kWarning;
  finding.impact = 1;
  finding.advice =
      "read an earlier attempt's step times in the trace's steps view by its attempt column, and "
      "its collectives by their comm ids (docs/trace-format.md)";
  if (outcome.step_attempts.empty()) {
    finding.evidence = fmt::format(
        "torchrun restarted the job's workers {} time{} (--max-restarts): each attempt's "
        "collectives are on groups of their own (comm ids ending @restartN); no attempt recorded "
        "a step",
        outcome.restarts, outcome.restarts == 1 ? "" : "s");
    return finding;
  }
  const int analysed = outcome.step_attempts.back().attempt;
  const std::string last =
      analysed == outcome.restarts
          ? std::string("the last")
          : fmt::format("the last that recorded steps; attempt {} recorded none", outcome.restarts);
  finding.evidence = fmt::format(
      "torchrun restarted the job's workers {} time{} (--max-restarts): each attempt's "
      "collectives are on groups of their own (comm ids ending @restartN) and its steps are kept "
      "under its attempt ({}); the step figures of this analysis are attempt {}'s ({})",
      outcome.restarts, outcome.restarts == 1 ? "" : "s", step_attempts_text(outcome.step_attempts),
      analysed, last);
  return finding;
}

// Step numbers recorded again in one attempt of the job: the job's own step counter started
// again (per epoch, a second training loop), so the steps table holds each number's latest. In
// a trace older than version 7 a restart's steps are replaced rows too: the restart says so.
std::optional<Finding> repeated_steps_finding(const RunOutcome& outcome) {
  if (outcome.earlier_steps.empty()) return std::nullopt;
  if (outcome.restarts > 0 && !outcome.steps_by_attempt) return std::nullopt;
  Finding finding;
  finding.kind = "step_numbers_repeated";
  finding.severity = Severity::kInfo;
  finding.impact = 0;
  finding.evidence = fmt::format(
      "the job recorded step numbers more than once{}: {} were replaced by later steps of the "
      "same numbers; the steps table and these analyses hold each rank's latest step of a "
      "number, and the replaced rows are kept in the earlier_steps view",
      outcome.restarts > 0 ? " within one attempt" : "", earlier_steps_text(outcome.earlier_steps));
  finding.advice =
      "where the steps are marked ranges (--step-marker, NVTX), name each by a global step "
      "that does not start again each epoch; a restarted process without torchrun's "
      "TORCHELASTIC_RESTART_COUNT also numbers its steps from 0 again";
  return finding;
}

std::vector<Finding> run_outcome_findings(const RunOutcome& outcome) {
  std::vector<Finding> findings = data_loss_findings(outcome.data_loss);
  if (std::optional<Finding> restarted = restarted_finding(outcome)) {
    findings.push_back(std::move(*restarted));
  }
  if (std::optional<Finding> repeated = repeated_steps_finding(outcome)) {
    findings.push_back(std::move(*repeated));
  }
  if (std::optional<Finding> failed = rank_failed_finding(outcome)) {
    findings.insert(findings.begin(), std::move(*failed));
  }
  if (std::optional<Finding> diagnosis = diagnosis_finding(outcome)) {
    findings.insert(findings.begin(), std::move(*diagnosis));
  }
  return findings;
}

StatusOr<AnalysisReport> analyze_run(const profiler::TraceReader& reader,
                                     const AnalysisWindow& window,
                                     const AnalysisProgress& progress) {
  const int64_t started = monotonic_ns();
  // The analyses below, in the order they run: the progress line's names and its count.
  static constexpr std::string_view kAnalyses[] = {
      "time per rank",   "GPU streams",        "collectives and stragglers",
      "pipeline bubble", "memory vs estimate", "expert load",
      "top kernels"};
  size_t next = 0;
  auto starting = [&] {
    if (progress)
      progress(kAnalyses[next], static_cast<int>(next) + 1, static_cast<int>(std::size(kAnalyses)));
    ++next;
  };
  AnalysisReport out;
  out.window = window;
  ASSIGN_OR_RETURN(out.tokens_per_s, window_tokens_per_second(reader, window));
  ASSIGN_OR_RETURN(out.outcome, read_run_outcome(reader));
  out.findings = run_outcome_findings(out.outcome);
  starting();
  RETURN_IF_ERROR(add_analysis(out, "ranks", started, analyze_temporal_breakdown(reader, window),
                               out.ranks, temporal_findings));
  starting();
  RETURN_IF_ERROR(add_analysis(out, "gpu", started, analyze_gpu_timeline(reader, window),
                               out.gpu, gpu_timeline_findings));
  starting();
  RETURN_IF_ERROR(add_collective_analyses(reader, started, out));
  starting();
  RETURN_IF_ERROR(add_analysis(out, "pipeline", started, analyze_pipeline_bubble(reader, window),
                               out.pipeline, pipeline_bubble_findings));
  starting();
  RETURN_IF_ERROR(add_analysis(out, "memory", started,
                               analyze_memory_vs_estimate(reader, window), out.memory,
                               memory_vs_estimate_findings));
  starting();
  RETURN_IF_ERROR(add_analysis(out, "experts", started, analyze_expert_load(reader, window),
                               out.experts, expert_load_findings));
  starting();
  RETURN_IF_ERROR(add_analysis(out, "kernels", started, analyze_top_kernels(reader, window),
                               out.kernels, top_kernels_findings));
  if (std::optional<Finding> nothing = nothing_recorded_finding(out)) {
    out.findings.push_back(std::move(*nothing));
  }
  RETURN_IF_ERROR(add_node_file_finding(reader, out.findings));
  account_for_the_straggler(out.stragglers, out.findings);
  account_for_uneven_steps(out.findings);
  follow_the_desync(out.findings);
  discount_missing_collectives(out.findings, out.outcome.data_loss);
  discount_unrecorded_compute(out.findings, out.outcome.data_loss);
  note_unclean_disconnects(out.findings, out.outcome.unclean_ranks);
  sort_findings(out.findings);
  return out;
}

}  // namespace partrain::analyzers
