#include "analyzers/failure_origin.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <string_view>

#include "core/rank_list.h"
#include "core/subprocess.h"
#include "profiler/trace_reader/collective_reads.h"

namespace partrain::analyzers {

bool reached_from_a_peer(const std::string& exception) {
  static constexpr std::string_view kSigns[] = {
      "torch/distributed/",  "closed by peer",     "reset by peer",
      "Connection reset",    "Connection refused", "Broken pipe",
      "remote process exit", "ncclRemoteError",    "communicator was aborted",
      "DistBackendError",    "DistNetworkError",   "DistStoreError",
      "Timed out",           "timed out",          "collective operation timeout"};
  return std::any_of(std::begin(kSigns), std::end(kSigns), [&](std::string_view sign) {
    return exception.find(sign) != std::string::npos;
  });
}

std::optional<std::string> program_end_stat(const std::vector<profiler::StatRow>& stats, int rank) {
  for (const profiler::StatRow& stat : stats) {
    if (stat.name == "torch_gloo_groups_at_exit" && stat.rank == rank) return stat.description;
  }
  return std::nullopt;
}

namespace {

// "all_reduce seq 6 of default_pg:0 (step 2)": the op as the missing_collective finding names it.
std::string op_text(const profiler::CollectiveOp& op) {
  return fmt::format("{} seq {} of {}{}", op.op, op.seq, op.comm_id,
                     op.step ? fmt::format(" (step {})", *op.step) : std::string());
}

// The op's members: its recorded group, else every rank of the trace.
std::vector<int> members_of(const profiler::CollectiveOp& op,
                            const std::vector<profiler::RankRow>& ranks) {
  if (!op.group_ranks.empty()) {
    StatusOr<std::vector<int>> group = parse_rank_list(op.group_ranks);
    if (group.is_ok()) return *group;
  }
  std::vector<int> all;
  for (const profiler::RankRow& rank : ranks) all.push_back(rank.rank);
  return all;
}

bool holds(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// "exited (code 0)", "was stopped by signal 15 (SIGTERM)"; "" where the launcher's exits are not
// in the trace (torchrun's ranks).
std::string exit_text(const profiler::RankRow& rank) {
  if (rank.exit_signal.value_or(0) != 0) {
    return fmt::format("was stopped by signal {} ({})", *rank.exit_signal,
                       signal_name(*rank.exit_signal));
  }
  if (rank.exit_code) return fmt::format("exited (code {})", *rank.exit_code);
  return "";
}

}  // namespace

StatusOr<std::optional<FailureOrigin>> trace_failure_origin(
    const profiler::TraceReader& reader, int failing_rank, const std::string& failing_exception,
    const std::vector<profiler::RankRow>& ranks, const std::vector<profiler::StatRow>& stats) {
  if (!reached_from_a_peer(failing_exception)) return std::optional<FailureOrigin>();
  ASSIGN_OR_RETURN(const std::optional<profiler::RunRow> run, reader.run());
  const int64_t start_ns = run ? run->start_ns.value_or(0) : 0;
  auto since_start = [&](int64_t ns) { return static_cast<double>(ns - start_ns) / 1e9; };
  ASSIGN_OR_RETURN(const std::vector<profiler::CollectiveOp> unfinished,
                   profiler::unfinished_collectives(reader));
  // What the failing rank waited in when it failed: its latest unfinished op.
  const profiler::CollectiveOp* awaited = nullptr;
  for (const profiler::CollectiveOp& op : unfinished) {
    if (op.rank == failing_rank) awaited = &op;
  }
  if (awaited == nullptr) return std::optional<FailureOrigin>();
  ASSIGN_OR_RETURN(const std::vector<int> entered,
                   profiler::ranks_that_recorded(reader, awaited->comm_id, awaited->seq));
  std::map<int, std::string> exceptions;
  std::set<int> unclean;
  for (const profiler::StatRow& stat : stats) {
    if (!stat.rank) continue;
    if (stat.name == "rank_uncaught_exception") exceptions[*stat.rank] = stat.description;
    if (stat.name == "collector_unclean_disconnects" && stat.value > 0) unclean.insert(*stat.rank);
  }
  for (const int rank : members_of(*awaited, ranks)) {
    if (rank == failing_rank || holds(entered, rank)) continue;
    FailureOrigin origin;
    origin.waiter = failing_rank;
    origin.waiter_exception = failing_exception;
    origin.rank = rank;
    origin.awaited = op_text(*awaited);
    origin.awaited_from_s = since_start(awaited->ts_ns);
    origin.failed_at_s = since_start(awaited->ts_ns + awaited->dur_ns);
    const auto row = std::find_if(ranks.begin(), ranks.end(),
                                  [&](const profiler::RankRow& r) { return r.rank == rank; });
    if (row != ranks.end()) origin.exit = exit_text(*row);
    ASSIGN_OR_RETURN(const std::optional<int64_t> last,
                     profiler::last_collective_end_ns(reader, rank));
    if (last) origin.last_collective_s = since_start(*last);
    // It waited itself, in an op of the failing rank's it never entered: a cycle.
    for (const profiler::CollectiveOp& own : unfinished) {
      if (own.rank != rank || !holds(members_of(own, ranks), failing_rank)) continue;
      ASSIGN_OR_RETURN(const std::vector<int> own_entered,
                       profiler::ranks_that_recorded(reader, own.comm_id, own.seq));
      if (holds(own_entered, failing_rank)) continue;
      origin.kind = OriginKind::kDeadlock;
      origin.own_wait = op_text(own);
      return std::optional(origin);
    }
    const auto raised = exceptions.find(rank);
    if (raised != exceptions.end()) {
      // A peer's failure reached it too: it waited on another rank, not on this one.
      if (reached_from_a_peer(raised->second)) continue;
      origin.kind = OriginKind::kRaised;
      origin.exception = raised->second;
      return std::optional(origin);
    }
    const bool launcher_saw_it_end =
        row != ranks.end() && row->exit_code == 0 && row->exit_signal.value_or(0) == 0;
    const bool exits_unknown = row == ranks.end() || (!row->exit_code && !row->exit_signal);
    if (launcher_saw_it_end || (exits_unknown && unclean.count(rank) == 0)) {
      origin.kind = OriginKind::kEnded;
      return std::optional(origin);
    }
    // It raised nothing and its atexit ran: its program had ended, whatever then stopped it in
    // the interpreter's shutdown (gloo's threads abort it there; a launcher's SIGTERM).
    if (const std::optional<std::string> ended = program_end_stat(stats, rank)) {
      origin.kind = OriginKind::kEnded;
      if (row != ranks.end() && row->exit_code.value_or(0) != 0) return std::optional(origin);
      origin.after_end = fmt::format(
          "; it then {} in the interpreter's shutdown ({})",
          origin.exit.empty() ? std::string("vanished without a goodbye to the collector")
                              : origin.exit,
          *ended);
      origin.exit = "ended its program (its atexit handlers ran)";
      return std::optional(origin);
    }
    origin.kind = OriginKind::kHung;
    return std::optional(origin);
  }
  return std::optional<FailureOrigin>();
}

}  // namespace partrain::analyzers
