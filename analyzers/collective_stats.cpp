// analyze_collective_stats: one pass over the (comm_id, seq) groups of the window, accumulating
// per (comm, op, size bucket) and matching each group across its members.
#include "analyzers/collective_stats.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "analyzers/bandwidth.h"
#include "analyzers/collective_groups.h"
#include "analyzers/sample_quantiles.h"
#include "core/byte_size.h"
#include "core/number_format.h"
#include "core/rank_list.h"
#include "profiler/p2p_seq.h"
#include "profiler/trace_reader/communicator_name.h"

namespace partrain::analyzers {
namespace {

constexpr double kNsPerMs = 1e6;

struct Accumulator {
  bool sized = false;
  int group_size = 0;
  int64_t count = 0;
  int64_t bytes = 0;
  int64_t time_ns = 0;
  SampleQuantiles times_ns;
  SampleQuantiles skews_ns;
};
// comm, op, label, size bucket
using StatsKey = std::tuple<std::string, std::string, std::string, int64_t>;
// Communicators in counting order ("tp 2" before "tp 10"), then op, label and size bucket.
struct StatsKeyBefore {
  bool operator()(const StatsKey& a, const StatsKey& b) const {
    if (std::get<0>(a) != std::get<0>(b)) {
      return profiler::communicator_before(std::get<0>(a), std::get<0>(b));
    }
    return std::tie(std::get<1>(a), std::get<2>(a), std::get<3>(a)) <
           std::tie(std::get<1>(b), std::get<2>(b), std::get<3>(b));
  }
};

}  // namespace

namespace detail {

// How long after a collective's start a live trace surely holds every rank's record of it: the
// recorders flush every 50 ms and the writer commits within a second.
constexpr int64_t kLiveSettleNs = 5'000'000'000;

// Accumulates one communicator at a time; matching state is per communicator.
class StatsCollector {
 public:
  explicit StatsCollector(bool run_ended) { report_.run_ended = run_ended; }
  void add_group(const CollectiveGroup& group);
  void end_comm();
  CollectiveStatsReport finish();

 private:
  Accumulator& at(const std::string& comm, std::string_view op, std::string_view label,
                  int64_t bytes) {
    // Consecutive rows are nearly always the same (op, label, bucket): one remembered entry
    // saves a map search and three strings per row (std::map nodes do not move).
    const int64_t bucket = size_bucket(bytes);
    if (last_ != nullptr && bucket == last_bucket_ && op == last_op_ && label == last_label_) {
      return *last_;
    }
    last_ = &stats_[StatsKey{comm, std::string(op), std::string(label), bucket}];
    last_op_ = op;
    last_label_ = label;
    last_bucket_ = bucket;
    return *last_;
  }
  void match_collective(const CollectiveGroup& group,
                        const std::vector<const CollectiveRow*>& rows);
  void match_p2p(const CollectiveGroup& group, const std::vector<const CollectiveRow*>& rows);
  void note_desync(const CollectiveGroup& group, const std::vector<const CollectiveRow*>& rows);
  bool note_conflict(const CollectiveGroup& group);
  void note_missing(const CollectiveGroup& group, int rank, std::string_view op,
                    std::vector<int> present);

  CollectiveStatsReport report_;
  std::map<StatsKey, Accumulator, StatsKeyBefore> stats_;
  // The entry `at` returned last, within the current communicator.
  Accumulator* last_ = nullptr;
  std::string last_op_;
  std::string last_label_;
  int64_t last_bucket_ = 0;
  // Per communicator: its desync (index into report_.desyncs), the highest seq each rank
  // recorded, and the runs each rank missed (settled in end_comm).
  std::optional<size_t> desync_;
  // Its membership conflict (index into report_.conflicts): its ops are then not matched.
  std::optional<size_t> conflict_;
  // How far each rank got: its highest seq and its latest start. On a live run a rank's records
  // reach the trace per thread and per flush, so a later seq can be there before an earlier
  // one: only a gap older than kLiveSettleNs is missing.
  struct Progress {
    int64_t max_seq = 0;
    int64_t max_start_ns = 0;
  };
  std::map<int, Progress> progress_;
  // A run a rank missed, and when its first collective started (on the other members).
  struct PendingRun {
    MissingCollective run;
    int64_t start_ns = 0;
  };
  std::map<int, std::vector<PendingRun>> pending_;
  // Reused between groups, so a group costs no allocation.
  std::vector<const CollectiveRow*> collectives_, p2p_;
};

void StatsCollector::add_group(const CollectiveGroup& group) {
  for (const CollectiveRow& row : group.rows) {
    auto [it, inserted] = progress_.try_emplace(row.rank, Progress{group.seq, row.ts_ns});
    if (!inserted) {
      it->second.max_seq = std::max(it->second.max_seq, group.seq);
      it->second.max_start_ns = std::max(it->second.max_start_ns, row.ts_ns);
    }
  }
  // Whether the members agree is judged over the whole trace: the window's steps are what the
  // figures describe, but a failed or hung run's decisive collectives come after its last whole
  // step (the step never ended), and a desync in the warm-up is a desync too.
  const bool in_window = group.in_window();
  if (in_window) ++report_.groups;
  std::vector<const CollectiveRow*>& collectives = collectives_;
  std::vector<const CollectiveRow*>& p2p = p2p_;
  collectives.clear();
  p2p.clear();
  for (const CollectiveRow& row : group.rows) {
    (is_p2p(row.op) ? p2p : collectives).push_back(&row);
    if (!row.in_window || !row.completed) continue;
    Accumulator& acc = at(group.comm_id, row.op, row.label, row.bytes);
    acc.group_size = std::max(acc.group_size, is_p2p(row.op) ? 2 : row.group_size);
    ++acc.count;
    acc.sized |= row.sized;
    acc.bytes += row.bytes;
    acc.time_ns += row.time_ns;
    acc.times_ns.add(static_cast<double>(row.time_ns));
    ++report_.ops;
  }
  if (note_conflict(group)) return;
  if (!collectives.empty()) match_collective(group, collectives);
  if (!p2p.empty()) match_p2p(group, p2p);
}

// Rows of one (comm_id, seq) whose ranks recorded different members are two groups under one
// name: noted once per communicator, every rank's list kept. True when the group has such rows.
bool StatsCollector::note_conflict(const CollectiveGroup& group) {
  const CollectiveRow& first = group.rows.front();
  const bool differ = std::any_of(group.rows.begin(), group.rows.end(), [&](const auto& row) {
    return !row.group_ranks.empty() && !first.group_ranks.empty() &&
           row.group_ranks != first.group_ranks;
  });
  if (!differ && !conflict_) return false;
  if (!conflict_) {
    conflict_ = report_.conflicts.size();
    report_.conflicts.push_back({group.comm_id, {}});
  }
  std::map<int, std::string>& members = report_.conflicts[*conflict_].members;
  for (const CollectiveRow& row : group.rows) {
    members.try_emplace(row.rank, std::string(row.group_ranks));
  }
  return true;
}

void StatsCollector::match_collective(const CollectiveGroup& group,
                                      const std::vector<const CollectiveRow*>& rows) {
  const CollectiveRow& first = *rows.front();
  for (const CollectiveRow* row : rows) {
    if (row->op != first.op ||
        (row->bytes != first.bytes && profiler::members_move_one_size(first.op))) {
      note_desync(group, rows);
      return;
    }
  }
  std::set<int> present;
  for (const CollectiveRow* row : rows) present.insert(row->rank);
  if (rows.size() >= 2 && group.in_window()) {
    Accumulator& acc = at(group.comm_id, first.op, first.label, first.bytes);
    acc.group_size = std::max(acc.group_size, first.group_size);
    acc.skews_ns.add(static_cast<double>(arrival_of(rows).skew_ns()));
  }
  for (int member : parse_group_ranks(first.group_ranks)) {
    if (!present.contains(member)) {
      note_missing(group, member, first.op, std::vector<int>(present.begin(), present.end()));
    }
  }
}

// A send pairs with the recv of the same (comm_id, seq) whose rank is the send's peer.
void StatsCollector::match_p2p(const CollectiveGroup& group,
                               const std::vector<const CollectiveRow*>& rows) {
  std::map<std::pair<int, int>, const CollectiveRow*> sends, recvs;  // key (src, dst)
  for (const CollectiveRow* row : rows) {
    if (!row->peer) continue;
    if (row->op == "send") sends[{row->rank, *row->peer}] = row;
    else recvs[{*row->peer, row->rank}] = row;
  }
  for (const auto& [key, send] : sends) {
    auto recv = recvs.find(key);
    if (recv == recvs.end()) {
      note_missing(group, key.second, "recv", {key.first});
      continue;
    }
    if (recv->second->bytes != send->bytes) {
      note_desync(group, {send, recv->second});
      continue;
    }
    if (!group.in_window()) continue;
    Accumulator& acc = at(group.comm_id, "send", send->label, send->bytes);
    acc.group_size = 2;
    acc.skews_ns.add(static_cast<double>(std::abs(recv->second->ts_ns - send->ts_ns)));
  }
  for (const auto& [key, recv] : recvs) {
    if (!sends.contains(key)) note_missing(group, key.first, "send", {key.second});
  }
}

void StatsCollector::note_desync(const CollectiveGroup& group,
                                 const std::vector<const CollectiveRow*>& rows) {
  if (desync_) {
    ++report_.desyncs[*desync_].later_mismatches;
    return;
  }
  Desync desync;
  desync.comm_id = group.comm_id;
  desync.seq = group.seq;
  for (const CollectiveRow* row : rows) {
    desync.members.push_back({row->rank, std::string(row->op), row->bytes});
  }
  std::sort(desync.members.begin(), desync.members.end(),
            [](const DesyncMember& a, const DesyncMember& b) { return a.rank < b.rank; });
  desync_ = report_.desyncs.size();
  report_.desyncs.push_back(std::move(desync));
}

void StatsCollector::note_missing(const CollectiveGroup& group, int rank, std::string_view op,
                                  std::vector<int> present) {
  std::vector<PendingRun>& runs = pending_[rank];
  if (!runs.empty() && (runs.back().run.last_seq + 1 == group.seq ||
                        runs.size() >= CollectiveStatsReport::kMaxMissing)) {
    MissingCollective& run = runs.back().run;
    run.last_seq = group.seq;  // past the cap, later runs fold into the last one
    ++run.count;
    if (std::find(run.ops.begin(), run.ops.end(), op) == run.ops.end()) run.ops.emplace_back(op);
    return;
  }
  int64_t start = std::numeric_limits<int64_t>::max();
  std::optional<int64_t> step;
  for (const CollectiveRow& row : group.rows) {
    start = std::min(start, row.ts_ns);
    if (!step && row.step && *row.step >= 0) step = row.step;
  }
  runs.push_back(
      {{group.comm_id, rank, {std::string(op)}, group.seq, group.seq, 1, std::move(present), step},
       start});
}

// A seq counts as missing once the run is over, or, while it runs, once the member recorded a
// later one that started kLiveSettleNs after it (records arrive per thread and per flush).
void StatsCollector::end_comm() {
  // Under a name two groups share, a rank "missing" an op may never have been the op's member.
  if (conflict_) pending_.clear();
  for (auto& [rank, runs] : pending_) {
    auto reached = progress_.find(rank);
    for (auto& [run, start_ns] : runs) {
      if (!report_.run_ended) {
        if (reached == progress_.end() || reached->second.max_seq < run.first_seq) continue;
        if (reached->second.max_start_ns - start_ns < kLiveSettleNs) continue;
        if (run.last_seq > reached->second.max_seq) {
          run.count -= run.last_seq - reached->second.max_seq;
          run.last_seq = reached->second.max_seq;
        }
      }
      report_.missing_total += run.count;
      if (report_.missing.size() < CollectiveStatsReport::kMaxMissing) {
        report_.missing.push_back(std::move(run));
      }
    }
  }
  pending_.clear();
  progress_.clear();
  desync_.reset();
  conflict_.reset();
  last_ = nullptr;
}

CollectiveStatsReport StatsCollector::finish() {
  for (const auto& [key, acc] : stats_) {
    CollectiveStatsRow row;
    std::tie(row.comm_id, row.op, row.label, row.size_bucket) = key;
    row.group_size = acc.group_size;
    row.count = acc.count;
    row.bytes = acc.bytes;
    row.sized = acc.sized;
    row.time_p50_ms = acc.times_ns.quantile(0.5) / kNsPerMs;
    row.time_p99_ms = acc.times_ns.quantile(0.99) / kNsPerMs;
    const Bandwidth bw = collective_bandwidth(row.op, static_cast<double>(acc.bytes),
                                              static_cast<double>(acc.time_ns) / 1e9,
                                              acc.group_size);
    row.algbw_gbps = bw.algbw_gbps;
    row.busbw_gbps = bw.busbw_gbps;
    row.matched = acc.skews_ns.count();
    row.skew_p50_ms = acc.skews_ns.quantile(0.5) / kNsPerMs;
    row.skew_p99_ms = acc.skews_ns.quantile(0.99) / kNsPerMs;
    report_.rows.push_back(std::move(row));
  }
  return std::move(report_);
}

}  // namespace detail

int64_t size_bucket(int64_t bytes) {
  if (bytes <= 0) return 0;
  return static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(bytes)));
}

CollectiveStatsPass::CollectiveStatsPass(bool run_ended)
    : collector_(std::make_unique<detail::StatsCollector>(run_ended)) {}
CollectiveStatsPass::~CollectiveStatsPass() = default;

GroupVisitor CollectiveStatsPass::visitor() {
  GroupVisitor visitor;
  detail::StatsCollector* collector = collector_.get();
  visitor.on_group = [collector](const CollectiveGroup& group) { collector->add_group(group); };
  visitor.on_comm_end = [collector](const std::string&) { collector->end_comm(); };
  return visitor;
}

CollectiveStatsReport CollectiveStatsPass::finish() { return collector_->finish(); }

StatusOr<bool> run_recorded_shapes(const profiler::TraceReader& reader) {
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> run, reader.run());
  if (!run) return false;
  const nlohmann::json config = nlohmann::json::parse(run->config, nullptr, false);
  return config.is_object() && config.value("record_shapes", false) == true;
}

StatusOr<CollectiveStatsReport> analyze_collective_stats(const profiler::TraceReader& reader,
                                                         const AnalysisWindow& window) {
  ASSIGN_OR_RETURN(bool ended, run_has_ended(reader));
  CollectiveStatsPass pass(ended);
  RETURN_IF_ERROR(for_each_collective_group(reader, window, pass.visitor()));
  CollectiveStatsReport report = pass.finish();
  ASSIGN_OR_RETURN(report.shapes_recorded, run_recorded_shapes(reader));
  return report;
}

namespace {

// Members that did the same (op, bytes), largest party first.
std::vector<std::pair<DesyncMember, std::vector<int>>> desync_parties(const Desync& desync) {
  std::map<std::pair<std::string, int64_t>, std::vector<int>> by_action;
  for (const DesyncMember& m : desync.members) by_action[{m.op, m.bytes}].push_back(m.rank);
  std::vector<std::pair<DesyncMember, std::vector<int>>> parties;
  for (const auto& [action, ranks] : by_action) {
    parties.push_back({DesyncMember{ranks.front(), action.first, action.second}, ranks});
  }
  std::stable_sort(parties.begin(), parties.end(), [](const auto& a, const auto& b) {
    return a.second.size() > b.second.size();
  });
  return parties;
}

std::string desync_text(const Desync& desync) {
  std::vector<std::string> parts;
  for (const auto& [action, ranks] : desync_parties(desync)) {
    parts.push_back(fmt::format("{} did {} of {} B", ranks_phrase(ranks), action.op,
                                action.bytes));
  }
  const std::string group = profiler::communicator_name(desync.comm_id);
  // A transfer's seq may carry its tag (profiler/p2p_seq.h): "seq 0 (tag 5)".
  const std::string seq = profiler::seq_text(
      desync.members.empty() ? "" : desync.members.front().op, static_cast<uint64_t>(desync.seq));
  std::string text = fmt::format("communicator {} {}: {}", group, seq, fmt::join(parts, "; "));
  if (desync.later_mismatches > 0) {
    text += fmt::format(" ({} later mismatches on {})", desync.later_mismatches, group);
  }
  return text;
}

std::string missing_text(const MissingCollective& m) {
  // Where in the program: the others' step at the first missing op, when they mark steps.
  const std::string step = m.step ? fmt::format("step {}", *m.step) : std::string();
  const std::string seqs = m.count == 1
                               ? fmt::format("{}{}",
                                             profiler::seq_text(m.ops.empty() ? "" : m.ops.front(),
                                                                static_cast<uint64_t>(m.first_seq)),
                                             m.step ? " (" + step + ")" : "")
                               : fmt::format("seqs {}-{} ({} ops{})", m.first_seq, m.last_seq,
                                             m.count, m.step ? ", from " + step : "");
  // A run of several ops names each (an all_reduce then a barrier is not "all_reduce seqs 0-1").
  return fmt::format("rank {} never recorded {} {} of communicator {} that {} recorded", m.rank,
                     fmt::join(m.ops, " and "), seqs, profiler::communicator_name(m.comm_id),
                     ranks_phrase(m.present));
}

std::string conflict_text(const MembershipConflict& conflict) {
  // Ranks that recorded the same members, together: "rank 0 recorded members 0,2; rank 3 ...".
  std::map<std::string, std::vector<int>> by_members;
  for (const auto& [rank, members] : conflict.members) by_members[members].push_back(rank);
  std::vector<std::string> parts;
  for (const auto& [members, ranks] : by_members) {
    parts.push_back(fmt::format("{} with members {}", ranks_phrase(ranks),
                                members.empty() ? std::string("(none recorded)") : members));
  }
  return fmt::format("ranks recorded communicator {} with different members: {}",
                     profiler::communicator_name(conflict.comm_id), fmt::join(parts, "; "));
}

}  // namespace

std::vector<Finding> collective_stats_findings(const CollectiveStatsReport& report) {
  std::vector<Finding> findings;
  for (const Desync& desync : report.desyncs) {
    Finding f;
    f.kind = "desync";
    f.severity = Severity::kCritical;
    f.impact = 1.0;
    const auto parties = desync_parties(desync);
    if (parties.size() >= 2 && parties.back().second.size() == 1 &&
        parties.front().second.size() > 1) {
      f.rank = parties.back().second.front();
    }
    f.evidence = desync_text(desync);
    f.advice = fmt::format(
        "every member of {} must issue the same collectives in the same order with the same "
        "sizes: look for a rank-dependent branch or a different model or config before seq {}",
        profiler::communicator_name(desync.comm_id), desync.seq);
    findings.push_back(std::move(f));
  }
  for (const MembershipConflict& conflict : report.conflicts) {
    Finding f;
    f.kind = "group_members_differ";
    f.severity = Severity::kCritical;
    f.impact = 1.0;
    f.evidence = conflict_text(conflict);
    f.advice = fmt::format(
        "process groups of different members share the name {}, so their ops are not matched "
        "across ranks (nor is a rank blamed for missing them): c10d "
        "names groups by a counter every rank must advance alike; a new_group(..., "
        "use_local_synchronization=True) that only some ranks call, or groups made in a "
        "different order on different ranks, makes the names diverge (PyTorch's store "
        "rendezvous of later groups can then hang too): make every rank create the same groups in "
        "the same order",
        profiler::communicator_name(conflict.comm_id));
    findings.push_back(std::move(f));
  }
  for (const MissingCollective& m : report.missing) {
    Finding f;
    f.kind = "missing_collective";
    f.severity = Severity::kCritical;
    f.rank = m.rank;
    f.impact = 1.0;
    f.evidence = missing_text(m);
    f.advice = fmt::format("rank {} crashed, hung or skipped the op: check its exit status and "
                           "log; a rank that skips a collective leaves the others waiting",
                           m.rank);
    findings.push_back(std::move(f));
  }
  return findings;
}

namespace {

std::string format_gbps(double gbps) { return format_bandwidth(gbps * 1e9); }

std::string format_ms(double ms) { return format_decimal(ms, 3) + " ms"; }

// A row's figure, null where it is not known (the text's "-"): its bytes and bandwidths without a
// recorded size, its times when none of its ops completed, its skews when no group matched.
template <typename T>
nlohmann::json known_or_null(bool known, T value) {
  return known ? nlohmann::json(value) : nlohmann::json(nullptr);
}

// A time in the text, "-" where it is not known: no op took "0 ms".
std::string ms_cell(bool known, double ms) { return known ? format_ms(ms) : "-"; }

}  // namespace

std::string format_collective_stats(const CollectiveStatsReport& report) {
  std::string out = fmt::format("Collectives: {} ops in {} (comm_id, seq) groups\n", report.ops,
                                report.groups);
  if (report.rows.empty()) return out + "  (no collectives in the window)\n";
  size_t comm_width = 4, op_width = 14;
  // An op its caller labelled reads "all_to_all moe_dispatch".
  auto op_cell = [](const CollectiveStatsRow& r) {
    return r.label.empty() ? r.op : r.op + " " + r.label;
  };
  for (const CollectiveStatsRow& r : report.rows) {
    comm_width = std::max(comm_width, profiler::communicator_name(r.comm_id).size());
    op_width = std::max(op_width, op_cell(r).size());
  }
  // "size" is one op's message (the row's mean), "total" the bytes of all `count` of them; "-"
  // where no size was recorded.
  out += fmt::format(
      "  {:<{}} {:<{}} {:>11} {:>6} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} "
      "{:>10}\n",
      "comm", comm_width, "op", op_width, "size", "count", "total", "time p50", "time p99", "algbw",
      "busbw", "skew p50", "skew p99");
  bool sizes_unknown = false, unfinished = false;
  for (const CollectiveStatsRow& r : report.rows) {
    const bool known = r.size_known();
    sizes_unknown |= !known && r.count > 0 && r.op != "barrier";
    unfinished |= r.count == 0;
    auto bytes_cell = [&](int64_t bytes) {
      return known ? format_bytes(static_cast<uint64_t>(bytes)) : std::string("-");
    };
    auto gbps_cell = [&](double gbps) {
      return r.bandwidth_known() ? format_gbps(gbps) : std::string("-");
    };
    out += fmt::format(
        "  {:<{}} {:<{}} {:>11} {:>6} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} "
        "{:>10}\n",
        profiler::communicator_name(r.comm_id), comm_width, op_cell(r), op_width,
        bytes_cell(r.size_bytes()), r.count, bytes_cell(r.bytes),
        ms_cell(r.count > 0, r.time_p50_ms), ms_cell(r.count > 0, r.time_p99_ms),
        gbps_cell(r.algbw_gbps), gbps_cell(r.busbw_gbps), ms_cell(r.matched > 0, r.skew_p50_ms),
        ms_cell(r.matched > 0, r.skew_p99_ms));
  }
  if (unfinished) {
    out +=
        "  count 0: issued in the window, none completed there (still in flight at its end, or "
        "completed where partrain cannot see it), so no time, size or bandwidth\n";
  }
  if (sizes_unknown && report.shapes_recorded) {
    // The profiler had record_shapes on: advising it would send the user round in a circle.
    out +=
        "  size -: the trace holds no message size for these ops (the profiler recorded shapes, "
        "but the import found no dtype or transfer that sizes them), so neither bytes nor "
        "bandwidth is known\n";
  } else if (sizes_unknown) {
    out +=
        "  size -: the trace holds no message size for these ops (a PyTorch profiler trace "
        "records them with record_shapes=True), so neither bytes nor bandwidth is known\n";
  }
  for (const Desync& desync : report.desyncs) out += "  desync: " + desync_text(desync) + "\n";
  for (const MembershipConflict& conflict : report.conflicts) {
    out += "  members differ: " + conflict_text(conflict) + "\n";
  }
  for (const MissingCollective& m : report.missing) out += "  missing: " + missing_text(m) + "\n";
  if (report.missing_total > 0) {
    out += fmt::format("  {} missing ops in all\n", report.missing_total);
  }
  return out;
}

nlohmann::json collective_stats_json(const CollectiveStatsReport& report) {
  nlohmann::json rows = nlohmann::json::array();
  for (const CollectiveStatsRow& r : report.rows) {
    rows.push_back({{"comm_id", r.comm_id},
                    {"group", profiler::communicator_name(r.comm_id)},
                    {"op", r.op},
                    {"label", r.label.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.label)},
                    {"size_bucket_bytes", known_or_null(r.size_known(), r.size_bucket)},
                    {"size_bytes", known_or_null(r.size_known(), r.size_bytes())},
                    {"group_size", r.group_size},
                    {"count", r.count},
                    {"bytes", known_or_null(r.size_known(), r.bytes)},
                    {"time_p50_ms", known_or_null(r.count > 0, r.time_p50_ms)},
                    {"time_p99_ms", known_or_null(r.count > 0, r.time_p99_ms)},
                    {"algbw_gbps", known_or_null(r.bandwidth_known(), r.algbw_gbps)},
                    {"busbw_gbps", known_or_null(r.bandwidth_known(), r.busbw_gbps)},
                    {"matched", r.matched},
                    {"skew_p50_ms", known_or_null(r.matched > 0, r.skew_p50_ms)},
                    {"skew_p99_ms", known_or_null(r.matched > 0, r.skew_p99_ms)}});
  }
  return rows;
}

nlohmann::json collective_matching_json(const CollectiveStatsReport& report) {
  nlohmann::json desyncs = nlohmann::json::array();
  for (const Desync& d : report.desyncs) {
    nlohmann::json members = nlohmann::json::array();
    for (const DesyncMember& m : d.members) {
      members.push_back({{"rank", m.rank}, {"op", m.op}, {"bytes", m.bytes}});
    }
    desyncs.push_back({{"comm_id", d.comm_id}, {"group", profiler::communicator_name(d.comm_id)},
                       {"seq", d.seq}, {"members", members},
                       {"later_mismatches", d.later_mismatches}});
  }
  nlohmann::json missing = nlohmann::json::array();
  for (const MissingCollective& m : report.missing) {
    missing.push_back({{"comm_id", m.comm_id},
                       {"group", profiler::communicator_name(m.comm_id)},
                       {"rank", m.rank},
                       {"op", m.ops.front()},
                       {"ops", m.ops},
                       {"first_seq", m.first_seq},
                       {"last_seq", m.last_seq},
                       {"count", m.count},
                       {"present", m.present},
                       {"step", m.step ? nlohmann::json(*m.step) : nlohmann::json(nullptr)}});
  }
  return {{"ops", report.ops},         {"groups", report.groups},   {"desyncs", desyncs},
          {"missing", missing},         {"missing_total", report.missing_total}};
}

}  // namespace partrain::analyzers
