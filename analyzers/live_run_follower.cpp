// LiveRunFollower: the incremental reads and what is derived from them (the last step's split,
// matched collectives, the step history and tokens/s over its latest steps).
#include "analyzers/live_run_follower.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "core/clock.h"
#include "profiler/trace_reader/live_reads.h"
#include "profiler/trace_reader/memory_reads.h"
#include "profiler/trace_reader/step_reads.h"

namespace partrain::analyzers {
namespace {

// How far back (in slices) the step breakdown looks past slices that end before the step.
constexpr int kBreakdownLookback = 4096;

// The span [start, end) split as `partrain analyze` splits a window, from a rank's recent
// slices (arrival order, so those that end before the span are skipped up to the lookback).
RankBreakdown breakdown_of(const std::deque<TimelineSlice>& slices, int64_t start, int64_t end) {
  std::vector<TimelineSlice> inside;
  int before = 0;
  for (auto it = slices.rbegin(); it != slices.rend() && before < kBreakdownLookback; ++it) {
    if (it->end_ns <= start) {
      ++before;
      continue;
    }
    if (it->start_ns >= end) continue;
    inside.push_back(*it);
  }
  std::sort(inside.begin(), inside.end(),
            [](const TimelineSlice& a, const TimelineSlice& b) { return a.start_ns < b.start_ns; });
  BusyTime busy(start, end);
  for (const TimelineSlice& s : inside) busy.add(s.start_ns, s.end_ns, s.kind, s.gpu);
  RankBreakdown b;
  busy.fill(b);
  return b;
}

// Appends `item`, evicting the oldest beyond `limit`; whether any was.
template <typename T>
bool push_bounded(std::deque<T>& items, T item, size_t limit) {
  items.push_back(std::move(item));
  const bool evicts = items.size() > limit;
  while (items.size() > limit) items.pop_front();
  return evicts;
}

// The rows the first read takes (the newest `budget`), or those that arrived since `last`.
int64_t read_from(int64_t last, int64_t newest, int64_t initial, int64_t per_refresh) {
  const int64_t budget = last < 0 ? initial : per_refresh;
  return std::max(last < 0 ? 0 : last, newest - budget);
}

}  // namespace

StatusOr<std::unique_ptr<LiveRunFollower>> LiveRunFollower::open(
    const std::filesystem::path& path, FollowLimits limits) {
  ASSIGN_OR_RETURN(profiler::TraceFile trace,
                   profiler::open_trace(path, profiler::TraceOpenMode::kReadStrict));
  std::unique_ptr<LiveRunFollower> follower(new LiveRunFollower(std::move(trace), limits));
  ASSIGN_OR_RETURN(follower->config_, read_workload_run_config(*follower->reader_));
  return follower;
}

LiveRunFollower::LiveRunFollower(profiler::TraceFile trace, FollowLimits limits)
    : trace_(std::move(trace)),
      reader_(std::make_unique<profiler::TraceReader>(trace_.db)),
      activities_(*reader_),
      limits_(limits) {}

LiveRunFollower::~LiveRunFollower() = default;

StatusOr<bool> LiveRunFollower::refresh(LiveRun& run) {
  run.trace_path = trace_.path.string();
  run.live = profiler::writer_alive(trace_.path);
  ASSIGN_OR_RETURN(const int64_t data_version, profiler::data_version(*reader_));
  const bool changed = !data_version_ || *data_version_ != data_version;
  data_version_ = data_version;
  if (changed) {
    // One read transaction: every table is read at the same commit of the writer.
    ASSIGN_OR_RETURN(profiler::ReadSnapshot snapshot, profiler::ReadSnapshot::begin(*reader_));
    std::map<int, bool> touched;
    Status read = read_run(run);
    if (read.is_ok()) read = read_ranks(run);
    if (read.is_ok()) read = read_slices(run, touched);
    if (read.is_ok()) read = read_memory(run);
    if (read.is_ok()) read = read_steps(run, touched);
    if (read.is_ok()) read = read_stats(run);
    Status end = snapshot.end();
    RETURN_IF_ERROR(read);
    RETURN_IF_ERROR(end);
    // A traced program that did not say (no WORLD_SIZE): the ranks seen so far, as export says.
    if (run.world_size <= 0) run.world_size = static_cast<int>(run.ranks.size());
    if (!config_) {
      ASSIGN_OR_RETURN(config_, read_workload_run_config(*reader_));
    }
    apply_estimate(run);
    derive(run, touched);
  }
  // A run left `running` by a writer that is gone reads as incomplete (as open_trace reports it).
  if (run.status == "running" && !run.live) run.status = "incomplete";
  if (run.status == "running" && run.start_ns > 0) {
    run.elapsed_ns = monotonic_ns() - run.start_ns;  // the same host's clock (node 0)
  } else {
    run.elapsed_ns = run.end_ns > run.start_ns ? run.end_ns - run.start_ns : 0;
  }
  return changed;
}

Status LiveRunFollower::read_run(LiveRun& run) {
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> row, reader_->run());
  if (!row) return Status::ok();
  run.run_id = row->run_id;
  run.status = row->status ? std::string(profiler::run_status_name(*row->status)) : "unknown";
  run.command = row->command;
  run.imported = !row->imported_from.empty();
  run.world_size = row->world_size.value_or(0);
  run.start_ns = row->start_ns.value_or(0);
  if (row->end_ns) run.end_ns = std::max(run.end_ns, *row->end_ns);
  return Status::ok();
}

Status LiveRunFollower::read_ranks(LiveRun& run) {
  ASSIGN_OR_RETURN(const std::vector<profiler::RankRow> ranks, reader_->ranks());
  for (const profiler::RankRow& rank : ranks) {
    RankStatus& row = rank_row(run, rank.rank);
    row.host = rank.host;
    row.device = rank.device;
    if (rank.exit_code) row.exit_code = rank.exit_code;
    if (rank.exit_signal) row.exit_signal = rank.exit_signal;
  }
  return Status::ok();
}

StatusOr<profiler::StoredSliceCursor> LiveRunFollower::first_or_new_slices(LiveRun& run,
                                                                           int64_t newest) {
  if (last_slice_id_ < 0 && newest > limits_.initial_slices) {
    // A finished trace's ids need not be time: an import writes rank by rank, and the newest
    // ids alone were the last ranks' whole run, the first ranks' nothing (all idle). Its index
    // gives the newest slices by time, every rank's.
    ASSIGN_OR_RETURN(const bool by_time, profiler::slices_indexed_by_time(*reader_));
    if (by_time) {
      ASSIGN_OR_RETURN(const int64_t since,
                       profiler::newest_slices_start(*reader_, limits_.initial_slices));
      run.older_slices_dropped = true;
      return profiler::slices_started_since(*reader_, since, newest);
    }
  }
  // A live trace's ids follow time (the collector stores what arrives).
  const int64_t from = read_from(last_slice_id_, newest, limits_.initial_slices,
                                 limits_.slices_per_refresh);
  if (from > std::max<int64_t>(last_slice_id_, 0)) run.older_slices_dropped = true;
  return profiler::slices_stored_between(*reader_, from, newest);
}

Status LiveRunFollower::read_slices(LiveRun& run, std::map<int, bool>& touched) {
  ASSIGN_OR_RETURN(const int64_t newest, profiler::last_slice_id(*reader_));
  ASSIGN_OR_RETURN(profiler::StoredSliceCursor slices, first_or_new_slices(run, newest));
  profiler::StoredSlice slice;
  while (slices.next(slice)) {
    ++rows_read_;
    RankStatus& row = rank_row(run, slice.rank);
    row.last_event_ns = std::max(row.last_event_ns, slice.end_ns);
    run.end_ns = std::max(run.end_ns, slice.end_ns);
    run.data_end_ns = std::max(run.data_end_ns, slice.end_ns);
    if (!slice.category) continue;
    ASSIGN_OR_RETURN(const Activity kind, activities_.of(*slice.category, slice.name_id));
    if (kind == Activity::kPhase || kind == Activity::kStep) continue;  // containers of the others
    if (push_bounded(run.slices[slice.rank],
                     TimelineSlice{slice.start_ns, slice.end_ns, kind, on_gpu(*slice.category)},
                     LiveRun::kMaxSlicesPerRank)) {
      run.older_slices_dropped = true;
    }
    touched[slice.rank] = true;
    if (kind == Activity::kComm && slice.is_collective) add_collective(run, slice);
  }
  RETURN_IF_ERROR(slices.status());
  last_slice_id_ = newest;
  return Status::ok();
}

void LiveRunFollower::add_collective(LiveRun& run, const profiler::StoredSlice& slice) {
  const profiler::CollectiveOp& op = slice.collective;
  const CollectiveRow member = collective_row(op);
  RankStatus& row = rank_row(run, slice.rank);
  if (!row.collective || row.collective->end_ns <= member.end_ns) {
    row.collective = RankCollective{std::string(op.op), std::string(op.comm_id), op.seq,
                                    member.end_ns, member.end_ns - member.ts_ns, false};
  }
  std::optional<MatchedGroup> matched = matcher_.add(op.comm_id, op.seq, member);
  if (!matched) return;
  const MatchedCollective& m = matched->collective;
  CollectiveTotals& totals = run.collective_totals[{m.comm_id, m.op, m.label}];
  ++totals.ops;
  totals.bytes += m.bytes;
  const int64_t last_start = m.skew_ns + std::min_element(matched->members.begin(),
                                                          matched->members.end(),
                                                          [](auto& a, auto& b) {
                                                            return a.ts_ns < b.ts_ns;
                                                          })->ts_ns;
  for (const CollectiveRow& member_row : matched->members) {
    RankStatus& r = rank_row(run, member_row.rank);
    if (r.collective && r.collective->comm_id == m.comm_id && r.collective->seq == m.seq) {
      r.collective->waited_ns = last_start - member_row.ts_ns;
      r.collective->matched = true;
    }
  }
  push_bounded(run.collectives, std::move(matched->collective), LiveRun::kMaxRecentCollectives);
}

Status LiveRunFollower::read_memory(LiveRun& run) {
  ASSIGN_OR_RETURN(const int64_t newest, profiler::last_memory_rowid(*reader_));
  const int64_t from = read_from(last_memory_rowid_, newest, limits_.initial_memory_samples,
                                 limits_.memory_samples_per_refresh);
  ASSIGN_OR_RETURN(profiler::MemoryCursor samples,
                   profiler::memory_stored_between(*reader_, from, newest));
  profiler::MemoryRow sample;
  while (samples.next(sample)) {
    ++rows_read_;
    add_memory_sample(run, sample.rank, sample.ts_ns, sample.category, sample.bytes);
  }
  RETURN_IF_ERROR(samples.status());
  last_memory_rowid_ = newest;
  return Status::ok();
}

Status LiveRunFollower::read_steps(LiveRun& run, std::map<int, bool>& touched) {
  for (RankStatus& row : run.ranks) {
    const auto last = last_step_.find(row.rank);
    const int64_t after = last == last_step_.end() ? int64_t{-1} : last->second;
    ASSIGN_OR_RETURN(profiler::StepCursor steps,
                     profiler::rank_steps(*reader_, row.rank, after + 1, INT64_MAX));
    profiler::StepRow step;
    while (steps.next(step)) {
      ++rows_read_;
      const int64_t tokens = step.tokens.value_or(0);
      push_bounded(run.steps[row.rank],
                   StepMark{step.step, step.ts_ns, step.dur_ns, tokens, step.loss},
                   LiveRun::kMaxStepsPerRank);
      // A step older than the history's newest is one a rank reported late: it is not plotted.
      if (run.history.empty() || step.step > run.history.back().step) {
        StepPoint& point = pending_steps_[step.step];
        point.step = step.step;
        merge_step(point, step.ts_ns, step.dur_ns, tokens, step.loss);
      }
      row.step = step.step;
      row.step_ns = step.dur_ns;
      ++row.steps_total;
      row.steps_total_ns += step.dur_ns;
      if (step.loss) row.loss = step.loss;
      last_step_[row.rank] = step.step;
      touched[row.rank] = true;
    }
    RETURN_IF_ERROR(steps.status());
  }
  return Status::ok();
}

Status LiveRunFollower::read_stats(LiveRun& run) {
  ASSIGN_OR_RETURN(const std::vector<profiler::StatRow> stats, reader_->stats());
  run.data_loss_events = 0;
  run.trace_stopped = false;
  for (const profiler::StatRow& stat : stats) {
    // What analyze counts as lost (trace_data_loss.h), not an error a rank reported (an uncaught
    // exception read "1 events lost").
    if (stat.severity == profiler::StatSeverity::kDataLoss) run.data_loss_events += stat.value;
    if (stat.name == "trace_stopped") run.trace_stopped = true;  // trace_writer.h
  }
  RunOutcome outcome;
  read_diagnosis(stats, outcome);
  run.diagnosis = std::move(outcome.diagnosis);
  run.diagnosis_culprit = outcome.diagnosis_culprit;
  return Status::ok();
}

void LiveRunFollower::apply_estimate(LiveRun& run) {
  if (!config_) return;  // a foreign job (or a run row not written yet): no estimate
  if (!estimate_) {
    StatusOr<memory::EstimateInput> input = workload_estimate_input(*config_);
    if (!input.is_ok()) return;
    StatusOr<memory::MemoryEstimate> estimate = memory::estimate_memory(*input);
    if (!estimate.is_ok()) return;
    estimate_ = std::move(*estimate);
  }
  // Ranks join the trace one by one: each gets its stage's estimate when it first shows.
  for (const RankStatus& row : run.ranks) {
    MemoryChart& chart = run.memory[row.rank];
    if (chart.estimate_total) continue;
    const auto stage = static_cast<size_t>(config_->pp_stage(row.rank));
    if (stage >= estimate_->stages.size()) continue;
    const memory::StageMemory& s = estimate_->stages[stage];
    using memory::Category;
    auto set = [&chart](Category c, double bytes) {
      chart.estimate[static_cast<size_t>(c)] = static_cast<int64_t>(bytes);
    };
    set(Category::kParams, s.params);
    set(Category::kGrads, s.grads);
    set(Category::kOptimizer, s.optimizer);
    set(Category::kActivations, s.activations);
    set(Category::kComm, s.comm);
    chart.estimate_total = static_cast<int64_t>(s.total() - s.reserve);
  }
}

void LiveRunFollower::derive(LiveRun& run, const std::map<int, bool>& touched) {
  for (RankStatus& row : run.ranks) {
    if (!touched.count(row.rank) || run.steps[row.rank].empty()) continue;
    const StepMark& last = run.steps[row.rank].back();
    row.breakdown = breakdown_of(run.slices[row.rank], last.start_ns, last.start_ns + last.dur_ns);
    run.end_ns = std::max(run.end_ns, last.start_ns + last.dur_ns);
    run.data_end_ns = std::max(run.data_end_ns, last.start_ns + last.dur_ns);
  }
  // The latest step every rank of the trace has finished (a node's file holds its own ranks).
  std::optional<int64_t> common;
  for (const RankStatus& row : run.ranks) {
    if (!row.step) {
      common.reset();
      break;
    }
    common = common ? std::min(*common, *row.step) : *row.step;
  }
  run.step = common;
  if (common) {
    // Steps every rank has finished join the history, in order.
    while (!pending_steps_.empty() && pending_steps_.begin()->first <= *common) {
      push_bounded(run.history, std::move(pending_steps_.begin()->second),
                   LiveRun::kMaxHistorySteps);
      pending_steps_.erase(pending_steps_.begin());
    }
  }
  derive_throughput(run);
}

void LiveRunFollower::derive_throughput(LiveRun& run) {
  const int per_replica =
      config_ ? std::max(config_->resolved.layout.tp * config_->resolved.layout.pp, 1) : 1;
  run.tokens_per_s.reset();
  run.throughput_steps = 0;
  const size_t window = std::min<size_t>(run.history.size(), kThroughputWindowSteps);
  if (window > 0) {
    int64_t tokens = 0;
    for (size_t i = run.history.size() - window; i < run.history.size(); ++i) {
      tokens += run.history[i].tokens;
    }
    run.tokens_per_s = tokens_per_second(tokens, run.history[run.history.size() - window].start_ns,
                                         run.history.back().end_ns, per_replica);
    if (run.tokens_per_s) run.throughput_steps = static_cast<int64_t>(window);
  }
  for (RankStatus& row : run.ranks) {
    const std::deque<StepMark>& marks = run.steps[row.rank];
    const size_t n = std::min<size_t>(marks.size(), kThroughputWindowSteps);
    row.tokens_per_s.reset();
    if (n == 0) continue;
    int64_t tokens = 0;
    for (size_t i = marks.size() - n; i < marks.size(); ++i) tokens += marks[i].tokens;
    const StepMark& last = marks.back();
    row.tokens_per_s = tokens_per_second(tokens, marks[marks.size() - n].start_ns,
                                         last.start_ns + last.dur_ns, per_replica);
  }
}

}  // namespace partrain::analyzers
