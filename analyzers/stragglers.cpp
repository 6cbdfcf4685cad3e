// analyze_stragglers: per-rank lateness over the matched collectives of the window.
#include "analyzers/stragglers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "analyzers/collective_groups.h"
#include "analyzers/sample_quantiles.h"
#include "core/interval_union.h"
#include "core/number_format.h"
#include "profiler/p2p_seq.h"
#include "profiler/trace_reader/step_reads.h"

namespace partrain::analyzers {
namespace {

constexpr double kNsPerMs = 1e6;
constexpr double kCriticalStepShare = 0.20;
constexpr double kWarningStepShare = 0.05;
// A rank last at fewer delayed collectives than this may be chance (one slow start, the victim of
// a rank that then hung): its straggler finding is a warning at most, and says on how few.
constexpr int64_t kConfidentLastCount = 3;
// A rank last more often than chance would make it with this probability or more is no critical
// straggler (its waits may be the host's noise, not its slowness).
constexpr double kChanceLevel = 0.05;

struct OpCounts {
  int64_t delayed = 0;
  int64_t last = 0;
};
// The time the others waited for a rank: the union of [first member's start, its start] over the
// delayed collectives it came last to. Collectives of several communicators in flight together
// (a TP group's and a DP group's, both held up by the same late rank) overlap, and their lateness
// is one wait, not two: summed, a rank late once could wait over 100% of the step.
class WaitIntervals {
 public:
  void add(int64_t start_ns, int64_t end_ns) {
    intervals_.emplace_back(start_ns, end_ns);
    if (intervals_.size() >= kCompactAt) compact();  // bounded memory on long traces
  }
  int64_t total_ns() {
    compact();
    int64_t total = 0;
    for (const auto& [start, end] : intervals_) total += end - start;
    return total;
  }
  // The part of the union outside `other`'s union.
  int64_t total_ns_outside(WaitIntervals& other) {
    compact();
    other.compact();
    int64_t total = 0;
    size_t j = 0;
    for (auto [start, end] : intervals_) {
      while (j < other.intervals_.size() && other.intervals_[j].second <= start) ++j;
      for (size_t k = j; k < other.intervals_.size() && other.intervals_[k].first < end; ++k) {
        if (other.intervals_[k].first > start) total += other.intervals_[k].first - start;
        start = std::max(start, other.intervals_[k].second);
        if (start >= end) break;
      }
      if (start < end) total += end - start;
    }
    return total;
  }

 private:
  static constexpr size_t kCompactAt = 1 << 16;
  // Sorted and merged: no two intervals overlap.
  void compact() { merge_intervals(intervals_); }
  std::vector<std::pair<int64_t, int64_t>> intervals_;
};

struct RankAccumulator {
  int64_t matched = 0;
  int64_t delayed = 0;
  int64_t last = 0;
  WaitIntervals waits;
  // When it waited itself (early at a delayed collective, or its recv's sender late): what it
  // held up meanwhile was held up by whoever it waited for, who is charged with it instead.
  WaitIntervals held_up;
  int64_t wait_ns = 0;      // waits' total outside held_up, at the end
  SampleQuantiles late_ns;  // lateness where it was last at a delayed collective
  // The same, each with its start: where spikes fell, and the others' lateness for the noise.
  std::vector<std::pair<int64_t, int64_t>> late_events;
  // Its largest lateness and where: a hold-up, when it is one (find_hold_up).
  struct Largest {
    int64_t late_ns = 0;
    int64_t ts_ns = 0;
    std::string op;
    size_t comm = 0;  // into the pass's communicators
    uint64_t seq = 0;
  } largest;
  std::map<std::string, OpCounts, std::less<>> by_op;
};

struct StepTimes {
  double median_ms = 0;
  double mean_ms = 0;
  int64_t steps = 0;
  std::map<int, double> rank_mean_ms;  // each rank's own mean step
  struct Span {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    int64_t step = 0;
  };
  std::map<int, std::vector<Span>> rank_steps;  // each rank's steps in the window
};

// The median and mean duration of the analysed ranks' steps inside the window and the number of
// steps. Without steps the window is one step as long as the window.
StatusOr<StepTimes> step_time(const profiler::TraceReader& reader, const AnalysisWindow& window) {
  if (!window.has_steps) {
    StepTimes whole;
    whole.median_ms = whole.mean_ms =
        static_cast<double>(window.end_ns - window.start_ns) / kNsPerMs;
    whole.steps = 1;
    return whole;
  }
  ASSIGN_OR_RETURN(profiler::StepCursor steps,
                   profiler::window_steps(reader, window.first_step, window.last_step));
  StepTimes times;
  SampleQuantiles durations;
  double total_ns = 0;
  std::map<int, std::pair<double, int64_t>> per_rank;  // total ns, steps
  profiler::StepRow step;
  while (steps.next(step)) {
    if (!window.spans.contains(step.rank)) continue;
    durations.add(static_cast<double>(step.dur_ns));
    total_ns += static_cast<double>(step.dur_ns);
    per_rank[step.rank].first += static_cast<double>(step.dur_ns);
    ++per_rank[step.rank].second;
    times.rank_steps[step.rank].push_back({step.ts_ns, step.ts_ns + step.dur_ns, step.step});
  }
  RETURN_IF_ERROR(steps.status());
  const double count = static_cast<double>(durations.count());
  times.median_ms = durations.median() / kNsPerMs;
  times.mean_ms = count > 0 ? total_ns / count / kNsPerMs : 0;
  times.steps = window.last_step - window.first_step + 1;
  for (const auto& [rank, sum] : per_rank) {
    times.rank_mean_ms[rank] = sum.first / static_cast<double>(sum.second) / kNsPerMs;
  }
  return times;
}

OpCounts& op_counts(RankAccumulator& acc, std::string_view op) {
  auto found = acc.by_op.find(op);
  if (found == acc.by_op.end()) found = acc.by_op.emplace(std::string(op), OpCounts{}).first;
  return found->second;
}

// A matched group, kept until every group is seen: who was late at it for a reason of their own
// is settled in the order the groups were held up (attribute_lateness).
struct HeldGroup {
  struct Member {
    int rank = 0;
    int64_t ts_ns = 0;
    bool in_window = false;
  };
  std::string op;
  size_t comm = 0;  // into the pass's communicators (StragglerRanks::comms)
  uint64_t seq = 0;
  std::vector<Member> members;
  int64_t first_start_ns = 0;
  int64_t last_start_ns = 0;
  int64_t first_end_ns = 0;  // the earliest member's end (host clock)
};

// Members that matched (same op and size, or a send and the recv it pairs with).
void add_matched(const std::vector<const CollectiveRow*>& rows, size_t comm, uint64_t seq,
                 std::vector<HeldGroup>& groups) {
  const GroupArrival arrival = arrival_of(rows);
  HeldGroup& group = groups.emplace_back();
  group.op = std::string(rows.front()->op);
  group.comm = comm;
  group.seq = seq;
  group.first_start_ns = arrival.first_start_ns;
  group.last_start_ns = arrival.last_start_ns;
  group.first_end_ns = rows.front()->end_ns;
  group.members.reserve(rows.size());
  for (const CollectiveRow* row : rows) {
    group.members.push_back({row->rank, row->ts_ns, row->in_window});
    group.first_end_ns = std::min(group.first_end_ns, row->end_ns);
  }
}

// Transfers: a send and the recv it pairs with (the same communicator and seq, rank and peer
// swapped) are a group of two. Either side waits for the other (Gloo's and NCCL's send complete
// once the receiver has posted its recv), so a slow pipeline stage holds up the stage before it
// as well as the one after.
void add_transfers(const CollectiveGroup& group, size_t comm, std::vector<HeldGroup>& groups) {
  for (const CollectiveRow& send : group.rows) {
    if (send.op != "send" || !send.peer) continue;
    const auto recv = std::find_if(group.rows.begin(), group.rows.end(), [&](const auto& r) {
      return r.op == "recv" && r.rank == *send.peer && r.peer == send.rank;
    });
    if (recv == group.rows.end() || recv->bytes != send.bytes) continue;
    add_matched({&send, &*recv}, comm, static_cast<uint64_t>(group.seq), groups);
  }
}

// A collective group counts when two or more members recorded it and all agree on op and size.
// `rows` is scratch space reused between groups.
void add_group(const CollectiveGroup& group, size_t comm, std::vector<HeldGroup>& groups,
               std::vector<const CollectiveRow*>& rows) {
  rows.clear();
  for (const CollectiveRow& row : group.rows) {
    if (!is_p2p(row.op)) rows.push_back(&row);
  }
  if (rows.size() < group.rows.size()) add_transfers(group, comm, groups);
  if (rows.size() < 2) return;
  for (const CollectiveRow* row : rows) {
    if (row->op != rows.front()->op ||
        (row->bytes != rows.front()->bytes && profiler::members_move_one_size(row->op))) {
      return;  // a desync
    }
  }
  add_matched(rows, comm, static_cast<uint64_t>(group.seq), groups);
}

// Charges each delayed group's lateness to its origin. A rank late at a group only because it
// waited earlier (its TP peers held up by the straggler, then late together at their DP
// all-reduce; a pipeline stage after a slow one) carries that delay: its lateness is the
// straggler's, already counted where the straggler was late. Each rank's `carry` is how far
// its timeline has been pushed back by waiting. Once its last member arrives a group's transfer
// runs, and every member leaves when it ends: with the earliest member's carry plus the skew plus
// the transfer (from the last arrival to the earliest member's end). A transfer that stalled
// with every member in (a member stopped inside it, a link that stalled) pushes its members back
// together: late together at their next collective, none of them by its own doing (the last of
// two ranks 44.9 s inside a stalled dp all-reduce, 2 ms after the other at the next world one,
// was named the critical straggler). The last member's own lateness is the skew less what its
// carry exceeds the earliest member's by. A group in sync adds no skew, and a transfer as short
// adds nothing: sub-millisecond lateness is noise, charged to nobody.
void attribute_lateness(std::vector<HeldGroup>& groups, std::map<int, RankAccumulator>& ranks,
                        WaitIntervals& all_waits) {
  std::stable_sort(groups.begin(), groups.end(), [](const HeldGroup& a, const HeldGroup& b) {
    return a.last_start_ns < b.last_start_ns;
  });
  std::map<int, int64_t> carry;
  for (const HeldGroup& group : groups) {
    const int64_t earliest = group.first_start_ns, latest = group.last_start_ns;
    const int64_t skew = latest - earliest;
    const bool delayed = static_cast<double>(skew) >= kDelayedSkewMs * kNsPerMs;
    const auto first = std::find_if(group.members.begin(), group.members.end(),
                                    [&](const auto& m) { return m.ts_ns == earliest; });
    const int64_t first_carry = carry[first->rank];
    // In sync (skew under kDelayedSkewMs, noise) the members leave as the earliest one does.
    int64_t leaving_carry = first_carry + (delayed ? skew : 0);
    for (const HeldGroup::Member& member : group.members) {
      const int64_t inherited = std::clamp(carry[member.rank] - first_carry, int64_t{0}, skew);
      if (delayed && member.ts_ns == latest) {
        leaving_carry = std::max(leaving_carry, carry[member.rank]);
      }
      if (!member.in_window) continue;
      RankAccumulator& acc = ranks[member.rank];
      ++acc.matched;
      if (!delayed) continue;
      ++acc.delayed;
      OpCounts& op = op_counts(acc, group.op);
      ++op.delayed;
      if (member.ts_ns != latest) {
        acc.held_up.add(member.ts_ns, latest);
        continue;
      }
      ++acc.last;
      ++op.last;
      const int64_t own = skew - inherited;
      if (static_cast<double>(own) < kDelayedSkewMs * kNsPerMs) continue;  // others' lateness
      acc.waits.add(latest - own, latest);
      all_waits.add(latest - own, latest);
      acc.late_ns.add(static_cast<double>(own));
      acc.late_events.emplace_back(latest, own);
      if (own > acc.largest.late_ns) acc.largest = {own, latest, group.op, group.comm, group.seq};
    }
    // A transfer as short as noise-level skew pushes nobody back, as such a skew does not.
    const int64_t transfer = group.first_end_ns - latest;
    if (static_cast<double>(transfer) >= kDelayedSkewMs * kNsPerMs) leaving_carry += transfer;
    for (const HeldGroup::Member& member : group.members) carry[member.rank] = leaving_carry;
  }
}

double share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// The rank's step that `ts_ns` fell in; none outside its steps (or without steps).
std::optional<int64_t> step_at(const std::vector<StepTimes::Span>* steps, int64_t ts_ns) {
  if (steps == nullptr) return std::nullopt;
  const auto in = std::find_if(steps->begin(), steps->end(), [&](const StepTimes::Span& s) {
    return ts_ns >= s.start_ns && ts_ns < s.end_ns;
  });
  if (in == steps->end()) return std::nullopt;
  return in->step;
}

// Lateness far over the rank's usual that comes back (a rank 100 ms late every 10th step, 3 ms
// the rest): the times, their median and the steps they fell in. Not spikes when they are half
// or more of its lateness: then that is its usual.
void find_spikes(const RankAccumulator& acc, const std::vector<StepTimes::Span>* steps,
                 RankLateness& r) {
  const double floor_ns = std::max(kLatenessNoiseMs, kSpikeFactor * r.late_p50_ms) * kNsPerMs;
  SampleQuantiles spikes;
  std::vector<int64_t> spike_steps;
  for (const auto& [ts, late] : acc.late_events) {
    if (static_cast<double>(late) < floor_ns) continue;
    spikes.add(static_cast<double>(late));
    if (const auto step = step_at(steps, ts)) spike_steps.push_back(*step);
  }
  if (spikes.count() < 2 || 2 * spikes.count() > acc.late_ns.count()) return;
  r.late_spikes = spikes.count();
  r.spike_p50_ms = spikes.median() / kNsPerMs;
  std::sort(spike_steps.begin(), spike_steps.end());
  spike_steps.erase(std::unique(spike_steps.begin(), spike_steps.end()), spike_steps.end());
  r.spike_steps = std::move(spike_steps);
}

// One lateness that is most of the waiting the rank caused, kSpikeFactor times over both its
// other lateness (median) and the noise floor: once, so no spikes, and with its usual lateness
// within noise the straggler read "may not be slower than the others" over a 304 ms hold-up.
void find_hold_up(const RankAccumulator& acc, const std::vector<StepTimes::Span>* steps,
                  const std::vector<std::string>& comms, RankLateness& r) {
  const RankAccumulator::Largest& largest = acc.largest;
  if (r.late_spikes > 0 || largest.late_ns == 0 || 2 * largest.late_ns < acc.wait_ns) return;
  SampleQuantiles others;
  bool skipped = false;  // the largest itself, once
  for (const auto& [ts, late] : acc.late_events) {
    if (!skipped && late == largest.late_ns && ts == largest.ts_ns) {
      skipped = true;
      continue;
    }
    others.add(static_cast<double>(late));
  }
  const double usual_ns = others.count() > 0 ? others.median() : 0.0;
  const double floor_ns = kSpikeFactor * std::max(kLatenessNoiseMs * kNsPerMs, usual_ns);
  if (static_cast<double>(largest.late_ns) < floor_ns) return;
  r.hold_up = RankLateness::HoldUp{
      static_cast<double>(largest.late_ns) / kNsPerMs,
      largest.op,
      comms.at(largest.comm),
      largest.seq,
      step_at(steps, largest.ts_ns),
      others.count() > 0 ? std::optional<double>(usual_ns / kNsPerMs) : std::nullopt};
}

RankLateness summarize(int rank, const RankAccumulator& acc, double step_ms, int64_t steps) {
  RankLateness r;
  r.rank = rank;
  r.matched = acc.matched;
  r.delayed = acc.delayed;
  r.last = acc.last;
  r.last_share = share(acc.last, acc.delayed);
  r.late_p50_ms = acc.late_ns.median() / kNsPerMs;
  r.late_p90_ms = acc.late_ns.quantile(0.9) / kNsPerMs;
  r.late_max_ms = acc.late_ns.quantile(1.0) / kNsPerMs;
  r.wait_per_step_ms = static_cast<double>(acc.wait_ns) / kNsPerMs / static_cast<double>(steps);
  // Waits fall inside the rank's own steps, or in the gaps between them: at most all of it.
  r.step_share = step_ms > 0 ? std::min(r.wait_per_step_ms / step_ms, 1.0) : 0.0;
  int64_t most_last = 0;
  for (const auto& [op, counts] : acc.by_op) {
    if (counts.last > most_last) {
      most_last = counts.last;
      r.last_op = op;
      r.last_op_share = share(counts.last, counts.delayed);
    }
  }
  return r;
}

bool clears_thresholds(const RankLateness& r, size_t ranks) {
  const double min_share =
      std::min(1.0, std::max(kMinWaitShare, kChanceFactor / static_cast<double>(ranks)));
  return r.wait_share >= min_share && r.wait_per_step_ms >= kMinWaitMs &&
         r.step_share >= kMinStepShare;
}

// The chance of a rank being last at `last` or more of `delayed` collectives when each of `ranks`
// is equally likely to be last at each: the binomial upper tail.
double chance_of_being_last(int64_t last, int64_t delayed, size_t ranks) {
  if (ranks < 2 || last <= 0) return 1;
  const double p = 1.0 / static_cast<double>(ranks);
  const double n = static_cast<double>(delayed);
  if (delayed > 10'000) {  // the normal approximation, with continuity correction
    const double z = (static_cast<double>(last) - 0.5 - n * p) / std::sqrt(n * p * (1 - p));
    return 0.5 * std::erfc(z / std::sqrt(2.0));
  }
  double tail = 0;
  for (int64_t k = last; k <= delayed; ++k) {
    const double kk = static_cast<double>(k);
    tail += std::exp(std::lgamma(n + 1) - std::lgamma(kk + 1) - std::lgamma(n - kk + 1) +
                     kk * std::log(p) + (n - kk) * std::log1p(-p));
  }
  return std::min(tail, 1.0);
}

// " in steps 9, 19 and 29"; the first kShown and how many more; empty without steps.
std::string spike_steps_text(const std::vector<int64_t>& steps) {
  constexpr size_t kShown = 8;
  if (steps.empty()) return "";
  std::string text = steps.size() == 1 ? " in step " : " in steps ";
  const size_t shown = std::min(steps.size(), kShown);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) text += i + 1 == steps.size() ? " and " : ", ";
    text += std::to_string(steps[i]);
  }
  if (shown < steps.size()) text += fmt::format(" and {} more", steps.size() - shown);
  return text;
}

// "all_reduce" -> "all-reduce"
std::string op_name(std::string op) {
  std::replace(op.begin(), op.end(), '_', '-');
  return op;
}

// "all_reduce" -> "all-reduces"
std::string op_plural(std::string op) { return op_name(std::move(op)) + "s"; }

// "rank 0 held the others up once: 304.0 ms late at the barrier of default_pg:0 seq 37 in step
// 10 ...": where the time went, which the median and the share of the step do not say.
std::string hold_up_text(const RankLateness& r) {
  const RankLateness::HoldUp& h = *r.hold_up;
  // Against its other latenesses, not its median of all, which the hold-up is part of (a rank
  // last once read "300 ms late ... against 300 ms late at the median").
  const std::string usual =
      h.usual_late_ms
          ? fmt::format("against {:.1f} ms late at the median otherwise", *h.usual_late_ms)
          : std::string("the only time it arrived last");
  return fmt::format(
      "rank {} held the others up once: {:.1f} ms late at the {} of {} {}{} ({}), {:.0f}% of "
      "the step on average ({:.0f}% of all waiting at collectives)",
      r.rank, h.late_ms, op_name(h.op), h.comm_id, profiler::seq_text(h.op, h.seq),
      h.step ? fmt::format(" in step {}", *h.step) : "", usual, 100 * r.step_share,
      100 * r.wait_share);
}

// Whether the straggler's usual lateness stands out from the run's own: the noise floor, and
// the lateness of the other ranks where they arrived last (a healthy job's ranks are all a
// little late at times; the one the scheduler favours least is last most often).
void judge_noise(const std::map<int, RankAccumulator>& ranks, StragglerReport& report) {
  SampleQuantiles others;
  for (const auto& [rank, acc] : ranks) {
    if (rank == report.straggler) continue;
    for (const auto& [ts, late] : acc.late_events) others.add(static_cast<double>(late));
  }
  if (others.count() >= kConfidentLastCount) report.others_late_ms = others.median() / kNsPerMs;
  if (!report.straggler) return;
  for (RankLateness& r : report.ranks) {
    if (r.rank != *report.straggler || r.late_spikes > 0 || r.hold_up) continue;
    r.within_noise =
        r.late_p50_ms < std::max(kLatenessNoiseMs, report.others_late_ms + kDelayedSkewMs);
  }
}

}  // namespace

namespace detail {

struct StragglerRanks {
  std::vector<std::string> comms;  // the communicators seen, in the pass's order
  std::vector<HeldGroup> groups;
  std::vector<const CollectiveRow*> scratch;
};

}  // namespace detail

StragglerPass::StragglerPass() : ranks_(std::make_unique<detail::StragglerRanks>()) {}
StragglerPass::~StragglerPass() = default;

GroupVisitor StragglerPass::visitor() {
  GroupVisitor visitor;
  detail::StragglerRanks* state = ranks_.get();
  visitor.on_group = [state](const CollectiveGroup& group) {
    // Groups come one communicator after another.
    if (state->comms.empty() || state->comms.back() != group.comm_id) {
      state->comms.push_back(group.comm_id);
    }
    add_group(group, state->comms.size() - 1, state->groups, state->scratch);
  };
  return visitor;
}

StatusOr<StragglerReport> StragglerPass::finish(const profiler::TraceReader& reader,
                                                const AnalysisWindow& window) {
  StragglerReport report;
  report.warm_up_only = window.warm_up_only;
  ASSIGN_OR_RETURN(StepTimes step, step_time(reader, window));
  report.median_step_ms = step.median_ms;
  report.mean_step_ms = step.mean_ms;
  report.steps = step.steps;
  report.stepless = !window.has_steps;
  std::map<int, RankAccumulator> ranks;
  WaitIntervals all_waits;
  attribute_lateness(ranks_->groups, ranks, all_waits);
  ranks_->groups.clear();
  int64_t total_wait_ns = 0;
  for (auto& [rank, acc] : ranks) {
    // A slow pipeline stage makes the stages after it late too, and a slow rank its peers in
    // their other groups: the waiting each of them caused while it waited itself is the slow
    // rank's.
    acc.wait_ns = acc.waits.total_ns_outside(acc.held_up);
    total_wait_ns += acc.wait_ns;
  }
  // Groups held up at the same time (a DP group per TP rank, all waiting for one node) are one
  // wait of the job's, not one per group: the union on the timeline, never more than the sum.
  report.wait_per_step_ms = static_cast<double>(std::min(total_wait_ns, all_waits.total_ns())) /
                            kNsPerMs / static_cast<double>(report.steps);
  double best = 0;
  for (const auto& [rank, acc] : ranks) {
    // The wait per step is a mean over the steps, so its share is of the mean step: over the
    // median, a rank slow in some steps only (which the median leaves out) read 127% of the step.
    // The rank's own: ranks in groups of their own (DDP on a subgroup) step at their own pace,
    // and a slow group's waits over the run's mean step read 178%.
    const auto own = step.rank_mean_ms.find(rank);
    report.ranks.push_back(
        summarize(rank, acc, own != step.rank_mean_ms.end() ? own->second : report.mean_step_ms,
                  report.steps));
    RankLateness& r = report.ranks.back();
    const auto spans = step.rank_steps.find(rank);
    const std::vector<StepTimes::Span>* rank_steps =
        spans != step.rank_steps.end() ? &spans->second : nullptr;
    find_spikes(acc, rank_steps, r);
    find_hold_up(acc, rank_steps, ranks_->comms, r);
    r.wait_share = share(acc.wait_ns, total_wait_ns);
    if (clears_thresholds(r, ranks.size()) && r.wait_per_step_ms > best) {
      best = r.wait_per_step_ms;
      report.straggler = rank;
    }
  }
  judge_noise(ranks, report);
  return report;
}

StatusOr<StragglerReport> analyze_stragglers(const profiler::TraceReader& reader,
                                             const AnalysisWindow& window) {
  StragglerPass pass;
  RETURN_IF_ERROR(for_each_collective_group(reader, window, pass.visitor()));
  return pass.finish(reader, window);
}

namespace {

// No one rank causes most of the waiting, but together they make each other wait a good share
// of every step: the lateness takes turns (each step another rank is slow: uneven data, a shared
// host's noise). The per-rank analysis names nobody; the job still loses the time.
std::optional<Finding> rotating_lateness(const StragglerReport& report) {
  int late_ranks = 0;
  bool all_within_noise = true;  // every one late by no more than host scheduling makes
  for (const RankLateness& r : report.ranks) {
    if (r.last > 0 && r.step_share >= kMinStepShare) {
      ++late_ranks;
      all_within_noise &= r.late_p50_ms < kLatenessNoiseMs && r.late_spikes == 0;
    }
  }
  const double total_ms = report.wait_per_step_ms;
  const double total_share =
      report.mean_step_ms > 0 ? std::min(total_ms / report.mean_step_ms, 1.0) : 0.0;
  if (late_ranks < 2 || total_share < kWarningStepShare || total_ms < kMinWaitMs) {
    return std::nullopt;
  }
  Finding f;
  f.kind = "rotating_lateness";
  f.impact = total_share;
  f.severity = total_share >= kCriticalStepShare ? Severity::kWarning : Severity::kInfo;
  f.evidence = fmt::format(
      "no single straggler, but {} ranks take turns arriving last at delayed collectives: "
      "together they keep the others waiting {:.1f} ms per step, {:.0f}% of the step (each "
      "rank's share is in the arrival table)",
      late_ranks, total_ms, 100 * total_share);
  if (all_within_noise) {
    // A healthy 2-rank job's ranks took turns 1-2 ms late and read a warning at 31% of a 5 ms step.
    f.severity = Severity::kInfo;
    f.evidence += fmt::format(
        "; each late by under {:.0f} ms at the median, within what host scheduling alone makes",
        kLatenessNoiseMs);
  }
  f.advice =
      "look for work that varies from step to step and rank to rank: uneven samples or sequence "
      "lengths per rank (pack or bucket them), data loading on the step's path, a noisy shared "
      "host; `partrain analyze --steps A:B` on a few steps shows who was late in each";
  return f;
}

}  // namespace

std::vector<Finding> straggler_findings(const StragglerReport& report, bool compute_recorded) {
  if (!report.straggler) {
    if (auto rotating = rotating_lateness(report)) return {*rotating};
    return {};
  }
  const auto it = std::find_if(report.ranks.begin(), report.ranks.end(),
                               [&](const RankLateness& r) { return r.rank == *report.straggler; });
  const RankLateness& r = *it;
  Finding f;
  f.kind = "straggler";
  f.rank = r.rank;
  f.impact = std::min(r.step_share, 1.0);
  f.severity = r.step_share >= kCriticalStepShare  ? Severity::kCritical
               : r.step_share >= kWarningStepShare ? Severity::kWarning
                                                   : Severity::kInfo;
  f.evidence =
      r.hold_up ? hold_up_text(r)
      : r.late_spikes > 0
          ? fmt::format(
                "rank {} is late now and then, not every step: {} times {:.1f} ms late at the "
                "median (max {:.1f} ms, against {:.1f} ms the rest of the time){}; {:.0f}% of the "
                "step on average ({:.0f}% of all waiting at collectives)",
                r.rank, r.late_spikes, r.spike_p50_ms, r.late_max_ms, r.late_p50_ms,
                spike_steps_text(r.spike_steps), 100 * r.step_share, 100 * r.wait_share)
          : fmt::format(
                "rank {} arrives last at {:.0f}% of delayed {} (skew >= {:.0f} ms), {:.1f} ms late "
                "at the median, {:.0f}% of the step ({:.0f}% of all waiting at collectives)",
                r.rank, 100 * r.last_op_share, op_plural(r.last_op), kDelayedSkewMs, r.late_p50_ms,
                100 * r.step_share, 100 * r.wait_share);
  f.advice = compute_recorded
                 ? fmt::format(
                       "check rank {}'s host for contention, thermal throttling, a slower "
                       "GPU; compare its compute time with the other ranks'",
                       r.rank)
                 : fmt::format(
                       "check rank {}'s host for contention (other processes on its "
                       "cores: `partrain launch --cpu-bind core` keeps ranks off each "
                       "other's), thermal throttling, or work only it does (data loading, "
                       "logging, longer samples); its compute is not in this trace (see "
                       "compute_unrecorded): torch.profiler on it, brought in with "
                       "`partrain import`, compares it with the other ranks'",
                       r.rank);
  if (r.hold_up) {
    f.advice = fmt::format(
        "look at what rank {} did alone before that {}{}: a checkpoint save, evaluation or "
        "logging only it runs keeps every other rank waiting there; spread it over the ranks "
        "(torch.distributed.checkpoint writes a shard on each), run it asynchronously, or run it "
        "less often. `partrain analyze --steps A:B` without that step shows the ranks' pace "
        "without it",
        r.rank, op_name(r.hold_up->op),
        r.hold_up->step ? fmt::format(" in step {}", *r.hold_up->step) : "");
  } else if (is_p2p(r.last_op)) {
    // A pipeline's transfers wait on the data dependency itself: a stage with more work than
    // its neighbours (the last stage's loss and output layer, an uneven layer split) keeps them
    // waiting as a slow host does, and the transfers alone cannot tell the two apart.
    if (f.severity == Severity::kCritical) f.severity = Severity::kWarning;
    f.evidence +=
        "; at point-to-point transfers (a pipeline's stages, a ring's neighbours), where a rank "
        "with more work than the ones it sends to waits the same way a slow host does";
    f.advice = fmt::format(
        "compare rank {}'s compute with its peers': in a pipeline, per micro-batch with the other "
        "stages' (the pipeline section), and balance the layers across stages (the last stage "
        "also computes the loss and output layer) if its stage has more; if not, check its host "
        "for contention, thermal throttling, a slower GPU",
        r.rank);
  }
  if (r.within_noise) {
    // Consistent, but no later than a healthy run's ranks are: the scheduler's, not the rank's.
    f.severity = Severity::kInfo;
    f.evidence += fmt::format(
        "; within this run's noise: {:.1f} ms is under {:.1f} ms{} (host scheduling alone makes "
        "one rank 1-2 ms late), so it may not be slower than the others",
        r.late_p50_ms, std::max(kLatenessNoiseMs, report.others_late_ms + kDelayedSkewMs),
        report.others_late_ms + kDelayedSkewMs > kLatenessNoiseMs
            ? fmt::format(", the other ranks' own lateness when last ({:.1f} ms) plus {:.0f} ms",
                          report.others_late_ms, kDelayedSkewMs)
            : "");
  } else if (r.late_spikes > 0 || r.hold_up) {
    // Last at few collectives, as chance would make it, but by far more than chance does.
  } else if (r.last < kConfidentLastCount) {
    if (f.severity == Severity::kCritical) f.severity = Severity::kWarning;
    f.evidence += fmt::format("; on only {} delayed collective{}, which may be chance", r.last,
                              r.last == 1 ? "" : "s");
  } else if (const double chance = chance_of_being_last(r.last, r.delayed, report.ranks.size());
             chance > kChanceLevel) {
    // Last no more often than one of N ranks would be by chance (oversubscribed cores, a noisy
    // host): its waits are real, but nothing singles it out.
    if (f.severity == Severity::kCritical) f.severity = Severity::kWarning;
    f.evidence += fmt::format(
        "; last at {} of {} delayed collectives, which chance alone gives one of {} ranks "
        "{:.0f}% of the time: it may not be slower than the others",
        r.last, r.delayed, report.ranks.size(), 100 * chance);
  }
  if (report.warm_up_only) {
    // One step, the warm-up: allocation, connection set-up and first-call costs differ between
    // ranks there without any rank being slow.
    f.severity = Severity::kInfo;
    f.evidence +=
        "; in the warm-up step only (the trace has one step), where one-off start-up "
        "costs can be what differs";
    f.advice = fmt::format("record more steps to tell; then {}", f.advice);
  }
  return {f};
}

std::string format_stragglers(const StragglerReport& report, RankRowOptions rows) {
  std::string out = fmt::format(
      "Arrival at collectives (lateness = start - first member's start; delayed: skew >= {:.0f} "
      "ms)\n",
      kDelayedSkewMs);
  if (report.ranks.empty()) return out + "  (no matched collectives in the window)\n";
  out += fmt::format("  {:>4} {:>8} {:>8} {:>8} {:>12} {:>12} {:>12} {:>8} {:>8}\n", "rank",
                     "matched", "delayed", "last", "late p50", "late p90", "wait/step",
                     "of step", "of wait");
  if (report.straggler) rows.named.insert(*report.straggler);
  std::vector<int> ranks;
  std::vector<std::vector<double>> figures;
  for (const RankLateness& r : report.ranks) {
    ranks.push_back(r.rank);
    figures.push_back({static_cast<double>(r.matched), static_cast<double>(r.delayed), r.last_share,
                       r.late_p50_ms, r.late_p90_ms, r.wait_per_step_ms});
  }
  std::string left_out;
  for (size_t i : rank_rows_to_print(ranks, figures, rows, left_out)) {
    const RankLateness& r = report.ranks[i];
    out += fmt::format("  {:>4} {:>8} {:>8} {:>8} {:>9} ms {:>9} ms {:>9} ms {:>8} {:>8}{}\n",
                       r.rank, r.matched, r.delayed, format_percent(r.last_share, 0),
                       format_decimal(r.late_p50_ms, 3), format_decimal(r.late_p90_ms, 3),
                       format_decimal(r.wait_per_step_ms, 3), format_percent(r.step_share),
                       format_percent(r.wait_share),
                       report.straggler == r.rank ? "  <- straggler" : "");
  }
  out += left_out;
  out += report.stepless ? fmt::format(
                               "  no steps: the window ({} ms) stands for the step in the per-step "
                               "columns\n",
                               format_decimal(report.median_step_ms, 3))
                         : fmt::format(
                               "  median step {} ms, mean {} ms (of step: of the mean) "
                               "over {} steps\n",
                               format_decimal(report.median_step_ms, 3),
                               format_decimal(report.mean_step_ms, 3), report.steps);
  return out;
}

namespace {

nlohmann::json hold_up_json(const RankLateness& r) {
  if (!r.hold_up) return nullptr;
  const RankLateness::HoldUp& h = *r.hold_up;
  return {{"late_ms", h.late_ms},
          {"op", h.op},
          {"comm_id", h.comm_id},
          {"seq", h.seq},
          {"step", h.step ? nlohmann::json(*h.step) : nlohmann::json(nullptr)},
          {"usual_late_ms",
           h.usual_late_ms ? nlohmann::json(*h.usual_late_ms) : nlohmann::json(nullptr)}};
}

}  // namespace

nlohmann::json stragglers_json(const StragglerReport& report) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankLateness& r : report.ranks) {
    ranks.push_back(
        {{"rank", r.rank},
         {"matched", r.matched},
         {"delayed", r.delayed},
         {"last", r.last},
         {"last_share", r.last_share},
         {"wait_share", r.wait_share},
         {"late_p50_ms", r.late_p50_ms},
         {"late_p90_ms", r.late_p90_ms},
         {"wait_per_step_ms", r.wait_per_step_ms},
         {"step_share", r.step_share},
         // A rank never last at a delayed collective has no such op: null, as '-'.
         {"last_op", r.last_op.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.last_op)},
         {"last_op_share", r.last_op_share},
         {"late_max_ms", r.late_max_ms},
         {"late_spikes", r.late_spikes},
         {"spike_p50_ms", r.spike_p50_ms},
         {"spike_steps", r.spike_steps},
         {"within_noise", r.within_noise},
         {"hold_up", hold_up_json(r)}});
  }
  nlohmann::json j = {{"ranks", ranks},
                      {"step_ms_median", report.median_step_ms},
                      {"step_ms_mean", report.mean_step_ms},
                      {"steps", report.steps},
                      {"stepless", report.stepless},
                      {"delayed_skew_ms", kDelayedSkewMs},
                      {"wait_per_step_ms", report.wait_per_step_ms},
                      {"others_late_ms", report.others_late_ms},
                      {"straggler", nullptr}};
  if (report.straggler) j["straggler"] = *report.straggler;
  return j;
}

}  // namespace partrain::analyzers
