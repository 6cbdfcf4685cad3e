// TraceFollower: the incremental reads and what is derived from them (step breakdowns, matched
// collectives, tokens/s). The raw tables are read, not the views: the views join strings and
// vocabularies per row, and a refresh must stay cheap on a live trace (docs/decisions.md,
// "Analyzers' hot loops read raw tables"; the columns are schema v1's, docs/trace-format.md).
#include "tui/trace_follower.h"

#include <fmt/format.h>

#include <algorithm>

#include "analyzers/bandwidth.h"
#include "analyzers/collective_groups.h"
#include "analyzers/temporal_breakdown.h"
#include "core/clock.h"
#include "memory/memory_estimate.h"
#include "profiler/trace_event.h"

namespace partrain::tui {
namespace {

using profiler::SliceCategory;
using profiler::SqliteStatement;

// Pending (comm_id, seq) groups kept while their other members' records are on their way; a
// member that never comes (a rank that died) must not grow this without bound.
constexpr size_t kMaxPendingGroups = 20'000;
// How far back (in slices) the step breakdown looks past slices that end before the step.
constexpr int kBreakdownLookback = 4096;

std::optional<SliceKind> slice_kind(int64_t category) {
  switch (static_cast<SliceCategory>(category)) {
    case SliceCategory::kCompute:
    case SliceCategory::kKernel: return SliceKind::kCompute;
    case SliceCategory::kCollective:
    case SliceCategory::kP2p: return SliceKind::kComm;
    case SliceCategory::kMemcpy:
    case SliceCategory::kMemset: return SliceKind::kMemcpy;
    case SliceCategory::kSync: return SliceKind::kSync;
    case SliceCategory::kStep:
    case SliceCategory::kPhase: return std::nullopt;  // containers of the others
  }
  return std::nullopt;
}

// docs/analysis.md's exclusive split of a span: compute, exposed comm, exposed memcpy, idle.
StepBreakdown breakdown_of(const std::deque<TimelineSlice>& slices, int64_t start, int64_t end) {
  std::vector<TimelineSlice> inside;
  int before = 0;
  for (auto it = slices.rbegin(); it != slices.rend() && before < kBreakdownLookback; ++it) {
    if (it->end_ns <= start) {
      ++before;
      continue;
    }
    if (it->start_ns >= end || it->kind == SliceKind::kSync) continue;
    inside.push_back({std::max(it->start_ns, start), std::min(it->end_ns, end), it->kind});
  }
  std::sort(inside.begin(), inside.end(),
            [](const TimelineSlice& a, const TimelineSlice& b) { return a.start_ns < b.start_ns; });
  analyzers::IntervalUnion compute, compute_comm, busy;
  for (const TimelineSlice& s : inside) {
    if (s.kind == SliceKind::kCompute) compute.add(s.start_ns, s.end_ns);
    if (s.kind != SliceKind::kMemcpy) compute_comm.add(s.start_ns, s.end_ns);
    busy.add(s.start_ns, s.end_ns);
  }
  StepBreakdown b;
  b.step_ns = end - start;
  b.compute_ns = compute.total_ns();
  b.exposed_comm_ns = compute_comm.total_ns() - b.compute_ns;
  b.exposed_memcpy_ns = busy.total_ns() - compute_comm.total_ns();
  return b;
}

template <typename T>
void push_bounded(std::deque<T>& items, T item, size_t limit) {
  items.push_back(std::move(item));
  while (items.size() > limit) items.pop_front();
}

}  // namespace

struct TraceFollower::Statements {
  SqliteStatement data_version, run, ranks, tracks, max_slice, slices, max_memory, memory, steps,
      stats, string;
};

struct TraceFollower::PendingGroup {
  struct Member {
    int rank;
    int64_t start_ns;
    int64_t end_ns;
  };
  std::string comm_id;
  std::string op;
  int64_t seq = 0;
  int64_t bytes = 0;
  int group_size = 0;
  std::vector<Member> members;
};

StatusOr<std::unique_ptr<TraceFollower>> TraceFollower::open(const std::filesystem::path& path,
                                                             FollowLimits limits) {
  ASSIGN_OR_RETURN(profiler::TraceFile trace,
                   profiler::open_trace(path, profiler::TraceOpenMode::kReadStrict));
  std::unique_ptr<TraceFollower> follower(new TraceFollower(std::move(trace), limits));
  auto stmts = std::make_unique<Statements>();
  const profiler::SqliteDb& db = follower->trace_.db;
  auto prepare = [&db](SqliteStatement& stmt, std::string_view sql) -> Status {
    ASSIGN_OR_RETURN(stmt, SqliteStatement::prepare(db, sql));
    return Status::ok();
  };
  RETURN_IF_ERROR(prepare(stmts->data_version, "PRAGMA data_version"));
  RETURN_IF_ERROR(prepare(stmts->run,
                          "SELECT run_id, status, command, coalesce(world_size, 0), "
                          "coalesce(start_ns, 0), end_ns FROM run WHERE id = 1"));
  RETURN_IF_ERROR(prepare(stmts->ranks,
                          "SELECT rank, coalesce(host, ''), coalesce(device, ''), exit_code, "
                          "exit_signal FROM rank ORDER BY rank"));
  RETURN_IF_ERROR(prepare(stmts->tracks, "SELECT id, rank, kind FROM track WHERE id > ?1"));
  RETURN_IF_ERROR(prepare(stmts->max_slice, "SELECT coalesce(max(id), 0) FROM slice"));
  // The collective row shares its slice's id: a primary-key probe per slice, no scan.
  RETURN_IF_ERROR(prepare(stmts->slices,
                          "SELECT s.id, s.track_id, s.ts_ns, s.dur_ns, s.category, c.comm_id, "
                          "c.seq, c.op, c.bytes, c.group_size, c.peer "
                          "FROM slice s LEFT JOIN collective c ON c.slice_id = s.id "
                          "WHERE s.id > ?1 AND s.id <= ?2 ORDER BY s.id"));
  RETURN_IF_ERROR(prepare(stmts->max_memory, "SELECT coalesce(max(rowid), 0) FROM memory"));
  RETURN_IF_ERROR(prepare(stmts->memory,
                          "SELECT rowid, rank, ts_ns, category, bytes FROM memory "
                          "WHERE rowid > ?1 AND rowid <= ?2 ORDER BY rowid"));
  RETURN_IF_ERROR(prepare(stmts->steps,
                          "SELECT step, ts_ns, dur_ns, loss, tokens FROM step "
                          "WHERE rank = ?1 AND step > ?2 ORDER BY step"));
  RETURN_IF_ERROR(prepare(stmts->stats,
                          "SELECT coalesce(sum(value), 0) FROM stat WHERE severity <> 'info'"));
  RETURN_IF_ERROR(prepare(stmts->string, "SELECT value FROM string WHERE id = ?1"));
  follower->stmts_ = std::move(stmts);
  ASSIGN_OR_RETURN(follower->config_, analyzers::read_workload_run_config(follower->trace_.db));
  return follower;
}

TraceFollower::TraceFollower(profiler::TraceFile trace, FollowLimits limits)
    : trace_(std::move(trace)), limits_(limits) {}

TraceFollower::~TraceFollower() = default;

StatusOr<std::string> TraceFollower::string_value(int64_t id) {
  if (auto it = strings_.find(id); it != strings_.end()) return it->second;
  SqliteStatement& stmt = stmts_->string;
  stmt.bind(1, id);
  std::string value = stmt.step() == SQLITE_ROW ? stmt.column_text(0) : std::string("?");
  stmt.reset();
  strings_.emplace(id, value);
  return value;
}

RankStatus& TraceFollower::rank_row(ViewModel& model, int rank) {
  auto it = std::lower_bound(model.ranks.begin(), model.ranks.end(), rank,
                             [](const RankStatus& r, int value) { return r.rank < value; });
  if (it == model.ranks.end() || it->rank != rank) {
    it = model.ranks.insert(it, RankStatus{});
    it->rank = rank;
  }
  return *it;
}

StatusOr<bool> TraceFollower::refresh(ViewModel& model) {
  model.trace_path = trace_.path.string();
  model.live = profiler::writer_alive(trace_.path);
  SqliteStatement& version = stmts_->data_version;
  const int64_t data_version = version.step() == SQLITE_ROW ? version.column_int(0) : -1;
  version.reset();
  const bool changed = !data_version_ || *data_version_ != data_version;
  data_version_ = data_version;
  if (changed) {
    // One read transaction: every table is read at the same commit of the writer.
    RETURN_IF_ERROR(trace_.db.exec("BEGIN"));
    std::map<int, bool> touched;
    Status read = read_run(model);
    if (read.is_ok()) read = read_ranks(model);
    if (read.is_ok()) read = read_tracks();
    if (read.is_ok()) read = read_slices(model, touched);
    if (read.is_ok()) read = read_memory(model);
    if (read.is_ok()) read = read_steps(model, touched);
    if (read.is_ok()) read = read_stats(model);
    Status end = trace_.db.exec("COMMIT");
    RETURN_IF_ERROR(read);
    RETURN_IF_ERROR(end);
    // A traced program that did not say (no WORLD_SIZE): the ranks seen so far, as export says.
    if (model.world_size <= 0) model.world_size = static_cast<int>(model.ranks.size());
    if (!estimate_loaded_) load_estimate(model);
    derive(model, touched);
  }
  // A run left `running` by a writer that is gone reads as incomplete (as open_trace reports it).
  if (model.status == "running" && !model.live) model.status = "incomplete";
  if (model.status == "running" && model.start_ns > 0) {
    model.elapsed_ns = monotonic_ns() - model.start_ns;  // the same host's clock (node 0)
  } else {
    model.elapsed_ns = model.end_ns > model.start_ns ? model.end_ns - model.start_ns : 0;
  }
  return changed;
}

Status TraceFollower::read_run(ViewModel& model) {
  SqliteStatement& stmt = stmts_->run;
  if (stmt.step() == SQLITE_ROW) {
    model.run_id = stmt.column_text(0);
    model.status = stmt.column_text(1);
    model.command = stmt.column_text(2);
    model.world_size = static_cast<int>(stmt.column_int(3));
    model.start_ns = stmt.column_int(4);
    if (!stmt.column_is_null(5)) model.end_ns = std::max(model.end_ns, stmt.column_int(5));
  }
  stmt.reset();
  return Status::ok();
}

Status TraceFollower::read_ranks(ViewModel& model) {
  SqliteStatement& stmt = stmts_->ranks;
  int rc = SQLITE_ROW;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    RankStatus& row = rank_row(model, static_cast<int>(stmt.column_int(0)));
    row.host = stmt.column_text(1);
    row.device = stmt.column_text(2);
    if (!stmt.column_is_null(3)) row.exit_code = static_cast<int>(stmt.column_int(3));
    if (!stmt.column_is_null(4)) row.exit_signal = static_cast<int>(stmt.column_int(4));
  }
  stmt.reset();
  if (rc != SQLITE_DONE) return profiler::trace_read_error(trace_.db, "reading the ranks");
  return Status::ok();
}

Status TraceFollower::read_tracks() {
  SqliteStatement& stmt = stmts_->tracks;
  stmt.bind(1, last_track_id_);
  int rc = SQLITE_ROW;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    const int64_t id = stmt.column_int(0);
    tracks_[id] = {static_cast<int>(stmt.column_int(1)), static_cast<int>(stmt.column_int(2))};
    last_track_id_ = std::max(last_track_id_, id);
  }
  stmt.reset();
  if (rc != SQLITE_DONE) return profiler::trace_read_error(trace_.db, "reading the tracks");
  return Status::ok();
}

Status TraceFollower::read_slices(ViewModel& model, std::map<int, bool>& touched) {
  SqliteStatement& max_stmt = stmts_->max_slice;
  const int64_t max_id = max_stmt.step() == SQLITE_ROW ? max_stmt.column_int(0) : 0;
  max_stmt.reset();
  const int64_t budget = last_slice_id_ < 0 ? limits_.initial_slices : limits_.slices_per_refresh;
  const int64_t from = std::max(last_slice_id_ < 0 ? 0 : last_slice_id_, max_id - budget);
  SqliteStatement& stmt = stmts_->slices;
  stmt.bind(1, from);
  stmt.bind(2, max_id);
  int rc = SQLITE_ROW;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    ++rows_read_;
    auto track = tracks_.find(stmt.column_int(1));
    if (track == tracks_.end()) continue;
    const int rank = track->second.first;
    const int64_t start = stmt.column_int(2);
    const int64_t end = start + stmt.column_int(3);
    const std::optional<SliceKind> kind = slice_kind(stmt.column_int(4));
    RankStatus& row = rank_row(model, rank);
    row.last_event_ns = std::max(row.last_event_ns, end);
    model.end_ns = std::max(model.end_ns, end);
    if (!kind) continue;
    push_bounded(model.slices[rank], TimelineSlice{start, end, *kind}, ViewModel::kMaxSlicesPerRank);
    touched[rank] = true;
    if (kind != SliceKind::kComm || stmt.column_is_null(5)) continue;
    ASSIGN_OR_RETURN(std::string comm_id, string_value(stmt.column_int(5)));
    ASSIGN_OR_RETURN(std::string op, string_value(stmt.column_int(7)));
    const int64_t seq = stmt.column_int(6);
    // p2p ops are numbered per (communicator, peer): the pair is part of the key.
    int low = -1, high = -1;
    if (analyzers::is_p2p(op) && !stmt.column_is_null(10)) {
      const int peer = static_cast<int>(stmt.column_int(10));
      low = std::min(rank, peer);
      high = std::max(rank, peer);
    }
    add_collective_member(model, rank, comm_id, {stmt.column_int(5), seq, low, high}, op,
                          stmt.column_int(8), static_cast<int>(stmt.column_int(9)), start, end);
  }
  stmt.reset();
  if (rc != SQLITE_DONE) return profiler::trace_read_error(trace_.db, "reading new slices");
  last_slice_id_ = max_id;
  return Status::ok();
}

void TraceFollower::add_collective_member(ViewModel& model, int rank, const std::string& comm_id,
                                          GroupKey key, const std::string& op, int64_t bytes,
                                          int group_size, int64_t start_ns, int64_t end_ns) {
  RankStatus& row = rank_row(model, rank);
  if (!row.collective || row.collective->end_ns <= end_ns) {
    row.collective = RankCollective{op, comm_id, std::get<1>(key), end_ns, end_ns - start_ns, false};
  }
  auto [it, inserted] = pending_.try_emplace(key);
  PendingGroup& group = it->second;
  if (inserted) {
    group = PendingGroup{comm_id, op, std::get<1>(key), bytes, group_size, {}};
    pending_order_.push_back(key);
  }
  group.members.push_back({rank, start_ns, end_ns});
  if (static_cast<int>(group.members.size()) >= std::max(group.group_size, 2)) {
    MatchedCollective m{group.comm_id, group.seq, group.op, group.bytes, group.group_size};
    auto first = std::min_element(group.members.begin(), group.members.end(),
                                  [](auto& a, auto& b) { return a.start_ns < b.start_ns; });
    auto last = std::max_element(group.members.begin(), group.members.end(),
                                 [](auto& a, auto& b) { return a.start_ns < b.start_ns; });
    m.skew_ns = last->start_ns - first->start_ns;
    m.last_rank = last->rank;
    std::vector<int64_t> durations;
    for (const auto& member : group.members) {
      durations.push_back(member.end_ns - member.start_ns);
      m.end_ns = std::max(m.end_ns, member.end_ns);
    }
    std::sort(durations.begin(), durations.end());
    const size_t n = durations.size();
    m.time_ns = n % 2 ? durations[n / 2] : (durations[n / 2 - 1] + durations[n / 2]) / 2;
    m.busbw_gbps = analyzers::collective_bandwidth(m.op, static_cast<double>(m.bytes),
                                                   static_cast<double>(m.time_ns) / 1e9,
                                                   m.group_size)
                       .busbw_gbps;
    for (const auto& member : group.members) {
      RankStatus& r = rank_row(model, member.rank);
      if (r.collective && r.collective->comm_id == m.comm_id && r.collective->seq == m.seq) {
        r.collective->waited_ns = last->start_ns - member.start_ns;
        r.collective->matched = true;
      }
    }
    push_bounded(model.collectives, std::move(m), ViewModel::kMaxRecentCollectives);
    pending_.erase(it);
  }
  while (pending_.size() > kMaxPendingGroups && !pending_order_.empty()) {
    pending_.erase(pending_order_.front());
    pending_order_.pop_front();
  }
  if (pending_order_.size() > 4 * kMaxPendingGroups) {
    // Keys of groups that completed are dropped lazily; compact now and then.
    std::deque<GroupKey> live;
    for (const GroupKey& k : pending_order_) {
      if (pending_.count(k)) live.push_back(k);
    }
    pending_order_.swap(live);
  }
}

Status TraceFollower::read_memory(ViewModel& model) {
  SqliteStatement& max_stmt = stmts_->max_memory;
  const int64_t max_rowid = max_stmt.step() == SQLITE_ROW ? max_stmt.column_int(0) : 0;
  max_stmt.reset();
  const int64_t budget =
      last_memory_rowid_ < 0 ? limits_.initial_memory_samples : limits_.memory_samples_per_refresh;
  const int64_t from = std::max(last_memory_rowid_ < 0 ? 0 : last_memory_rowid_, max_rowid - budget);
  SqliteStatement& stmt = stmts_->memory;
  stmt.bind(1, from);
  stmt.bind(2, max_rowid);
  int rc = SQLITE_ROW;
  while ((rc = stmt.step()) == SQLITE_ROW) {
    ++rows_read_;
    const int rank = static_cast<int>(stmt.column_int(1));
    const int64_t ts = stmt.column_int(2);
    const int64_t code = stmt.column_int(3);
    const size_t c = code >= 0 && code < static_cast<int64_t>(kMemoryCategories)
                         ? static_cast<size_t>(code)
                         : static_cast<size_t>(memory::Category::kOther);
    RankStatus& row = rank_row(model, rank);
    row.memory_bytes[c] = stmt.column_int(4);
    RankMemory& mem = model.memory[rank];
    mem.peak[c] = std::max(mem.peak[c], row.memory_bytes[c]);
    mem.peak_total = std::max(mem.peak_total, row.memory_total());
    // Samples within a microsecond of the previous point update it: the chart's resolution.
    if (!mem.points.empty() && ts - mem.points.back().ts_ns < 1000) {
      mem.points.back().bytes = row.memory_bytes;
    } else {
      mem.points.push_back({ts, row.memory_bytes});
    }
    if (mem.points.size() > ViewModel::kMaxMemoryPoints) {
      // Thin by half, keeping the larger total of each pair so peaks stay visible.
      std::deque<MemoryPoint> thinned;
      for (size_t i = 0; i + 1 < mem.points.size(); i += 2) {
        auto total = [](const MemoryPoint& p) {
          int64_t t = 0;
          for (int64_t b : p.bytes) t += b;
          return t;
        };
        thinned.push_back(total(mem.points[i]) >= total(mem.points[i + 1]) ? mem.points[i]
                                                                           : mem.points[i + 1]);
      }
      mem.points.swap(thinned);
    }
  }
  stmt.reset();
  if (rc != SQLITE_DONE) return profiler::trace_read_error(trace_.db, "reading memory samples");
  last_memory_rowid_ = max_rowid;
  return Status::ok();
}

Status TraceFollower::read_steps(ViewModel& model, std::map<int, bool>& touched) {
  SqliteStatement& stmt = stmts_->steps;
  for (RankStatus& row : model.ranks) {
    stmt.bind(1, int64_t{row.rank});
    const auto last = last_step_.find(row.rank);
    stmt.bind(2, last == last_step_.end() ? int64_t{-1} : last->second);
    int rc = SQLITE_ROW;
    while ((rc = stmt.step()) == SQLITE_ROW) {
      ++rows_read_;
      const int64_t step = stmt.column_int(0);
      push_bounded(model.steps[row.rank], StepMark{step, stmt.column_int(1), stmt.column_int(2),
                                                   stmt.column_is_null(4) ? 0 : stmt.column_int(4)},
                   ViewModel::kMaxStepsPerRank);
      row.step = step;
      row.step_ns = stmt.column_int(2);
      if (!stmt.column_is_null(3)) row.loss = stmt.column_double(3);
      last_step_[row.rank] = step;
      touched[row.rank] = true;
    }
    stmt.reset();
    if (rc != SQLITE_DONE) {
      return profiler::trace_read_error(trace_.db,
                                        fmt::format("reading the steps of rank {}", row.rank));
    }
  }
  return Status::ok();
}

Status TraceFollower::read_stats(ViewModel& model) {
  SqliteStatement& stmt = stmts_->stats;
  if (stmt.step() == SQLITE_ROW) model.data_loss_events = stmt.column_int(0);
  stmt.reset();
  return Status::ok();
}

void TraceFollower::load_estimate(ViewModel& model) {
  if (model.ranks.empty()) return;
  estimate_loaded_ = true;
  if (!config_) return;  // a foreign job: no estimate
  StatusOr<memory::EstimateInput> input = analyzers::workload_estimate_input(*config_);
  if (!input.is_ok()) return;
  StatusOr<memory::MemoryEstimate> estimate = memory::estimate_memory(*input);
  if (!estimate.is_ok()) return;
  for (const RankStatus& row : model.ranks) {
    const auto stage = static_cast<size_t>(config_->pp_stage(row.rank));
    if (stage >= estimate->stages.size()) continue;
    const memory::StageMemory& s = estimate->stages[stage];
    RankMemory& mem = model.memory[row.rank];
    using memory::Category;
    auto set = [&mem](Category c, double bytes) {
      mem.estimate[static_cast<size_t>(c)] = static_cast<int64_t>(bytes);
    };
    set(Category::kParams, s.params);
    set(Category::kGrads, s.grads);
    set(Category::kOptimizer, s.optimizer);
    set(Category::kActivations, s.activations);
    set(Category::kComm, s.comm);
    mem.estimate_total = static_cast<int64_t>(s.total() - s.reserve);
  }
}

void TraceFollower::derive(ViewModel& model, const std::map<int, bool>& touched) {
  for (RankStatus& row : model.ranks) {
    if (!touched.count(row.rank) || model.steps[row.rank].empty()) continue;
    const StepMark& last = model.steps[row.rank].back();
    row.breakdown = breakdown_of(model.slices[row.rank], last.start_ns, last.start_ns + last.dur_ns);
    model.end_ns = std::max(model.end_ns, last.start_ns + last.dur_ns);
  }
  // The latest step every rank has finished, and the run's throughput in it.
  std::optional<int64_t> common;
  for (const RankStatus& row : model.ranks) {
    if (!row.step) {
      common.reset();
      break;
    }
    common = common ? std::min(*common, *row.step) : *row.step;
  }
  model.step = common;
  model.tokens_per_s.reset();
  if (!common) return;
  int64_t tokens = 0, first = INT64_MAX, end = INT64_MIN;
  for (const RankStatus& row : model.ranks) {
    for (const StepMark& mark : model.steps[row.rank]) {
      if (mark.step != *common) continue;
      tokens += mark.tokens;
      first = std::min(first, mark.start_ns);
      end = std::max(end, mark.start_ns + mark.dur_ns);
    }
  }
  // Every rank of a data-parallel replica reports the replica's tokens (runner/workload/
  // trainer.cpp): divide by the ranks per replica (tp x pp) to count each token once.
  const int per_replica =
      config_ ? std::max(config_->resolved.layout.tp * config_->resolved.layout.pp, 1) : 1;
  if (end > first && tokens > 0) {
    model.tokens_per_s = static_cast<double>(tokens) / per_replica /
                         (static_cast<double>(end - first) / 1e9);
  }
}

int64_t total_bytes(const CategoryBytes& bytes) {
  int64_t total = 0;
  for (int64_t b : bytes) total += b;
  return total;
}

int64_t RankStatus::memory_total() const { return total_bytes(memory_bytes); }

}  // namespace partrain::tui
