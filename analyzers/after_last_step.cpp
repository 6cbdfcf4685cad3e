// after_last_step: each rank's collectives whose step is past the last step it ended.
#include "analyzers/after_last_step.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "profiler/trace_reader/step_reads.h"

namespace partrain::analyzers {
namespace {

constexpr double kNsPerMs = 1e6;

bool worth_saying(const RankAfterLastStep& r) {
  return r.collectives >= kTrailingCollectivesWorthSaying && r.span_ms >= r.step_ms;
}

// A run that failed, was killed or stopped recording ended inside an iteration: what it issued
// after its last step is that iteration's, cut short (a hang, a crash), which the failure's own
// findings tell. Only a run that ended normally has a tail to weigh.
StatusOr<bool> ended_normally(const profiler::TraceReader& reader) {
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> run, reader.run());
  return !run || !run->status || *run->status == profiler::RunStatus::kCompleted;
}

}  // namespace

GroupVisitor AfterLastStepPass::visitor() {
  GroupVisitor visitor;
  visitor.on_group = [this](const CollectiveGroup& group) {
    for (const CollectiveRow& row : group.rows) {
      if (!row.step) continue;  // before the first step began: no step is missing it
      if (!row.completed) continue;  // in flight when the rank stopped: the failure's to tell
      Tally& tally = by_step_[row.rank][*row.step];
      ++tally.ops;
      tally.time_ns += row.time_ns;
      tally.last_end_ns = std::max(tally.last_end_ns, row.end_ns);
    }
  };
  return visitor;
}

StatusOr<AfterLastStep> AfterLastStepPass::finish(const profiler::TraceReader& reader) const {
  // While the run goes on, the step its ranks are in has not ended yet: nothing is after the last.
  ASSIGN_OR_RETURN(const bool ended, ended_normally(reader));
  if (!ended) return AfterLastStep{};
  std::map<int, std::pair<int64_t, int64_t>> numbers;  // rank -> its first and last step
  int64_t longest = -1;
  for (const auto& [rank, steps] : by_step_) {
    ASSIGN_OR_RETURN(const auto recorded, profiler::step_numbers(reader, rank));
    if (recorded) {
      numbers[rank] = *recorded;
    } else if (!steps.empty()) {
      numbers[rank] = {-1, -1};  // began a step, ended none
      continue;
    } else {
      continue;
    }
    longest = std::max(longest, recorded->second);
  }
  AfterLastStep after;
  for (const auto& [rank, first_last] : numbers) {
    const auto [first, last] = first_last;
    const auto& steps = by_step_.at(rank);
    if (last < 0) {
      // Among ranks that did step, one that ended none stopped early (a crash, a hang): the
      // other findings' to tell.
      if (longest >= 0) continue;
      RankWithoutStepEnd r{.rank = rank, .first_step = steps.begin()->first};
      for (const auto& [step, tally] : steps) r.collectives += tally.ops;
      after.never_ended.push_back(r);
      continue;
    }
    if (last < longest) continue;  // stopped early: uneven_steps
    RankAfterLastStep r{.rank = rank, .last_step = last};
    int64_t time_ns = 0, last_end_ns = 0;
    for (auto it = steps.upper_bound(last); it != steps.end(); ++it) {
      r.collectives += it->second.ops;
      time_ns += it->second.time_ns;
      last_end_ns = std::max(last_end_ns, it->second.last_end_ns);
    }
    if (r.collectives == 0) continue;
    // The steady steps: the first (the warm-up: a DeepSpeed job's holds deepspeed.initialize,
    // 25 times a steady step) is left out, as the default window leaves it out, when others
    // follow it.
    const int64_t steady_first = last > first ? first + 1 : first;
    ASSIGN_OR_RETURN(const profiler::StepSpan all, profiler::step_span(reader, rank, first, last));
    ASSIGN_OR_RETURN(const profiler::StepSpan steady,
                     profiler::step_span(reader, rank, steady_first, last));
    ASSIGN_OR_RETURN(const profiler::StepSpan ended, profiler::step_span(reader, rank, last, last));
    r.time_ms = static_cast<double>(time_ns) / kNsPerMs;
    r.span_ms = static_cast<double>(std::max<int64_t>(last_end_ns - ended.end_ns, 0)) / kNsPerMs;
    r.steps = all.steps;
    r.stepped_ms = static_cast<double>(all.end_ns - all.start_ns) / kNsPerMs;
    r.step_ms = steady.steps > 0 ? static_cast<double>(steady.end_ns - steady.start_ns) / kNsPerMs /
                                       static_cast<double>(steady.steps)
                                 : 0.0;
    after.ranks.push_back(r);
  }
  return after;
}

namespace {

// No step ended on these ranks though one began: the report is of the whole run, unwindowed.
std::optional<Finding> no_step_ended(const AfterLastStep& after) {
  if (after.never_ended.empty()) return std::nullopt;
  std::vector<std::string> parts;
  for (const RankWithoutStepEnd& r : after.never_ended) {
    parts.push_back(fmt::format("rank {} issued {} collective{} in step {}", r.rank, r.collectives,
                                r.collectives == 1 ? "" : "s", r.first_step));
  }
  Finding f;
  f.kind = "no_step_ended";
  f.severity = Severity::kWarning;
  f.impact = 0;
  f.evidence = fmt::format(
      "{}, which never ended: a step began (a PyTorch job's step 0 begins when its first "
      "optimizer is made) but no optimizer step() returned, so the run has no steps and the "
      "report is of the whole run",
      fmt::join(parts, "; "));
  f.advice =
      "check that the optimizer steps at all: a GradScaler skips optimizer.step() on every step "
      "whose gradients hold inf or NaN (scaler.get_scale() falling each step says so: lower the "
      "learning rate, check the loss for overflow, or start from a smaller init_scale), and a "
      "loop that never calls optimizer.step() trains nothing; torch.profiler's prof.step() marks "
      "steps without an optimizer (docs/pytorch.md, \"Steps\")";
  return f;
}

}  // namespace

std::vector<Finding> after_last_step_findings(const AfterLastStep& after) {
  std::vector<Finding> findings;
  if (auto never = no_step_ended(after)) findings.push_back(std::move(*never));
  std::vector<std::string> parts;
  double impact = 0;
  for (const RankAfterLastStep& r : after.ranks) {
    if (!worth_saying(r)) continue;
    parts.push_back(fmt::format(
        "rank {} issued {} collectives ({:.1f} ms of their own) in the {:.1f} ms after step {}, "
        "the last step that ended (its mean step after the first: {:.1f} ms)",
        r.rank, r.collectives, r.time_ms, r.span_ms, r.last_step, r.step_ms));
    // Of the rank's time from its first step to its last collective.
    impact = std::max(impact, r.span_ms / (r.span_ms + r.stepped_ms));
  }
  if (parts.empty()) return findings;
  Finding f;
  f.kind = "after_last_step";
  f.severity = Severity::kInfo;
  f.impact = std::min(impact, 1.0);
  f.evidence = fmt::format("{}: outside every step window, so no figure of this report counts them",
                           fmt::join(parts, "; "));
  f.advice =
      "a step ends when the optimizer that marks steps returns from step(): the first one to "
      "step, until it is gone (docs/pytorch.md, \"Steps\"); an optimizer made to replace it while "
      "the old one is still referenced (by a scheduler, a closure, a list) marks none, so drop "
      "every reference to the old one, or mark steps with torch.profiler's prof.step(). Work the "
      "last iteration does after optimizer.step() (a final checkpoint or evaluation) belongs to a "
      "step that never ends: profile it apart if it matters";
  findings.push_back(std::move(f));
  return findings;
}

nlohmann::json after_last_step_json(const AfterLastStep& after) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankAfterLastStep& r : after.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"last_step", r.last_step},
                     {"collectives", r.collectives},
                     {"time_ms", r.time_ms},
                     {"span_ms", r.span_ms},
                     {"steps", r.steps},
                     {"step_ms", r.step_ms},
                     {"worth_saying", worth_saying(r)}});
  }
  nlohmann::json never_ended = nlohmann::json::array();
  for (const RankWithoutStepEnd& r : after.never_ended) {
    never_ended.push_back(
        {{"rank", r.rank}, {"first_step", r.first_step}, {"collectives", r.collectives}});
  }
  return {{"ranks", ranks}, {"never_ended", never_ended}};
}

}  // namespace partrain::analyzers
