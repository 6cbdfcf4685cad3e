#include "runner/launch/flight_diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/byte_size.h"
#include "core/duration.h"
#include "core/rank_list.h"
#include "profiler/p2p_seq.h"
#include "profiler/trace_reader/communicator_name.h"
#include "runner/launch/flight_index.h"
#include "runner/launch/wait_for_text.h"

namespace partrain::launch {
namespace {

// A collective a rank had waited in this long when it was stopped by a signal was stuck: the
// stop calls for a diagnosis (no collective of a healthy run waits seconds for its members).
constexpr int64_t kStalledNs = 5'000'000'000;

using profiler::CollectiveEvent;
using profiler::CollectiveState;
using profiler::DumpTrigger;
using profiler::FlightDump;

std::string size_key(const CollectiveEvent& e) {
  return fmt::format("{} {}", format_bytes(e.bytes), e.dtype);
}

// How often each key was seen at the seqs every member matched: what the communicator usually
// carries.
using KeyHistory = std::map<std::string, int64_t>;

// Groups the ranks by key, largest group first. A tie goes to the group whose key the
// communicator's matched history holds most often (two ranks, one of them deviating from what
// both did at every seq before), then to the group with the lowest rank (the reference the others
// are compared with).
std::vector<std::pair<std::string, std::vector<int>>> groups_by(
    const std::vector<std::pair<int, CollectiveEvent>>& issued,
    std::string (*key)(const CollectiveEvent&), const KeyHistory& history = {}) {
  std::map<std::string, std::vector<int>> by_key;
  for (const auto& [rank, event] : issued) by_key[key(event)].push_back(rank);
  std::vector<std::pair<std::string, std::vector<int>>> groups(by_key.begin(), by_key.end());
  auto seen = [&](const std::string& k) {
    auto found = history.find(k);
    return found == history.end() ? int64_t{0} : found->second;
  };
  std::sort(groups.begin(), groups.end(), [&](const auto& a, const auto& b) {
    if (a.second.size() != b.second.size()) return a.second.size() > b.second.size();
    if (seen(a.first) != seen(b.first)) return seen(a.first) > seen(b.first);
    return a.second.front() < b.second.front();
  });
  return groups;
}

std::string op_key(const CollectiveEvent& e) { return std::string(e.op); }
std::string op_and_size_key(const CollectiveEvent& e) {
  return fmt::format("{} of {}", e.op, size_key(e));
}
std::string full_size_key(const CollectiveEvent& e) {
  return fmt::format("{}|{}|{}", e.bytes, e.count, e.dtype);
}

// Everyone outside the reference (first) group.
std::vector<int> minority(const std::vector<std::pair<std::string, std::vector<int>>>& groups) {
  std::vector<int> ranks;
  for (size_t i = 1; i < groups.size(); ++i) {
    ranks.insert(ranks.end(), groups[i].second.begin(), groups[i].second.end());
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

// The first seq of one communicator that is not a completed match, or its last match.
CollectiveFinding judge(const std::string& comm_id, const CommRecord& record) {
  CollectiveFinding finding;
  finding.comm_id = comm_id;
  finding.members = record.members;
  for (int member : record.members) {
    if (!record.dumped.contains(member)) finding.undumped.push_back(member);
  }
  // Only seqs every dumped member still holds (or provably never reached) can be judged.
  uint64_t lowest = 0;
  std::set<uint64_t> seqs;
  for (const auto& [rank, member] : record.dumped) {
    if (member.wrapped && !member.by_seq.empty()) {
      lowest = std::max(lowest, member.by_seq.begin()->first);
    }
    for (const auto& [seq, event] : member.by_seq) seqs.insert(seq);
  }
  KeyHistory ops_seen, sizes_seen;
  for (uint64_t seq : seqs) {
    if (seq < lowest) continue;
    std::vector<std::pair<int, CollectiveEvent>> issued;
    std::vector<int> missing;
    std::vector<int64_t> missing_last;
    for (const auto& [rank, member] : record.dumped) {
      if (auto it = member.by_seq.find(seq); it != member.by_seq.end()) {
        issued.emplace_back(rank, *it->second);
      } else if (never_reached(member.by_seq, member.wrapped, seq)) {
        missing.push_back(rank);
        missing_last.push_back(last_seq(member.by_seq));
      }
    }
    const auto by_op = groups_by(issued, op_key, ops_seen);
    const auto by_size = groups_by(issued, full_size_key, sizes_seen);
    const bool open = std::any_of(issued.begin(), issued.end(), [](const auto& item) {
      return item.second.state != CollectiveState::kCompleted;
    });
    if (by_op.size() > 1) {
      finding.kind = FindingKind::kOpMismatch;
      finding.culprits = minority(by_op);
    } else if (by_size.size() > 1 && profiler::members_move_one_size(issued.front().second.op)) {
      finding.kind = FindingKind::kSizeMismatch;
      finding.culprits = minority(by_size);
    } else if (!missing.empty()) {
      finding.kind = FindingKind::kMissingRanks;
      finding.culprits = missing;
    } else if (open) {
      finding.kind = FindingKind::kMatched;
      finding.unfinished = true;
    } else {
      finding.seq = seq;
      ++finding.matched;
      if (!issued.empty()) {
        ++ops_seen[op_key(issued.front().second)];
        ++sizes_seen[full_size_key(issued.front().second)];
      }
      continue;
    }
    finding.seq = seq;
    finding.issued = std::move(issued);
    finding.missing = std::move(missing);
    finding.missing_last_seq = std::move(missing_last);
    return finding;
  }
  finding.kind = FindingKind::kMatched;
  return finding;
}

// The first seq of a channel that is not a completed pair, if any. A side without a dump is
// unknown: nothing is judged against it.
std::optional<CollectiveFinding> judge_channel(const ChannelKey& key, const ChannelRecord& record,
                                               const std::map<int, const FlightDump*>& by_rank) {
  auto dump_of = [&](int rank) -> const FlightDump* {
    auto found = by_rank.find(rank);
    return found == by_rank.end() ? nullptr : found->second;
  };
  auto wrapped = [](const FlightDump* d) { return d != nullptr && ring_wrapped(*d); };
  const FlightDump* sender = dump_of(key.sender);
  const FlightDump* receiver = dump_of(key.receiver);
  uint64_t lowest = 0;
  if (wrapped(sender) && !record.sends.empty()) lowest = record.sends.begin()->first;
  if (wrapped(receiver) && !record.recvs.empty()) {
    lowest = std::max(lowest, record.recvs.begin()->first);
  }
  std::set<uint64_t> seqs;
  for (const auto& [seq, e] : record.sends) seqs.insert(seq);
  for (const auto& [seq, e] : record.recvs) seqs.insert(seq);
  CollectiveFinding finding;
  finding.comm_id = key.comm_id;
  finding.sender = key.sender;
  finding.receiver = key.receiver;
  finding.members = {key.sender, key.receiver};
  if (sender == nullptr) finding.undumped.push_back(key.sender);
  if (receiver == nullptr) finding.undumped.push_back(key.receiver);
  for (uint64_t seq : seqs) {
    if (seq < lowest) continue;
    auto send = record.sends.find(seq);
    auto recv = record.recvs.find(seq);
    finding.seq = seq;
    if (send != record.sends.end() && recv != record.recvs.end()) {
      finding.issued = {{key.sender, *send->second}, {key.receiver, *recv->second}};
      if (full_size_key(*send->second) != full_size_key(*recv->second)) {
        finding.kind = FindingKind::kSizeMismatch;  // two sides: neither is the majority
        return finding;
      }
      if (send->second->state != CollectiveState::kCompleted ||
          recv->second->state != CollectiveState::kCompleted) {
        finding.kind = FindingKind::kMatched;
        finding.unfinished = true;
        return finding;
      }
      ++finding.matched;
      continue;
    }
    // One side posted it; the other is to blame if its dump shows it never got there.
    const bool send_side = send != record.sends.end();
    const FlightDump* other = send_side ? receiver : sender;
    const auto& other_seqs = send_side ? record.recvs : record.sends;
    if (other == nullptr || !never_reached(other_seqs, wrapped(other), seq)) continue;
    const int absent = send_side ? key.receiver : key.sender;
    finding.kind = FindingKind::kMissingRanks;
    finding.issued = {{send_side ? key.sender : key.receiver,
                       send_side ? *send->second : *recv->second}};
    finding.missing = {absent};
    finding.missing_last_seq = {last_seq(other_seqs)};
    finding.culprits = {absent};
    return finding;
  }
  return std::nullopt;
}

// A transfer `absent` has pending between the channel's two ranks, in the channel's direction,
// on another tag: the counterpart it posted instead of the one the channel waits for.
std::optional<uint32_t> pending_on_another_tag(const FlightIndex& index, const ChannelKey& key,
                                               int absent) {
  for (const auto& [other, record] : index.channels) {
    if (other.comm_id != key.comm_id || other.sender != key.sender ||
        other.receiver != key.receiver || other.tag == key.tag) {
      continue;
    }
    const RecordsBySeq& posted = absent == key.receiver ? record.recvs : record.sends;
    for (const auto& [seq, event] : posted) {
      if (event->state != CollectiveState::kCompleted) return other.tag;
    }
  }
  return std::nullopt;
}

bool is_problem(const CollectiveFinding& f) {
  return f.kind != FindingKind::kMatched || f.unfinished;
}

std::string states_of(const std::vector<std::pair<int, CollectiveEvent>>& issued) {
  std::map<std::string_view, std::vector<int>> by_state;
  for (const auto& [rank, event] : issued) {
    by_state[profiler::collective_state_name(event.state)].push_back(rank);
  }
  std::string text;
  for (const auto& [state, ranks] : by_state) {
    if (!text.empty()) text += ", ";
    text += fmt::format("{} on {}", state, ranks_phrase(ranks));
  }
  return text;
}

std::string describe_mismatch(const CollectiveFinding& f) {
  std::string text;
  for (const auto& [what, ranks] : groups_by(f.issued, op_and_size_key)) {
    if (!text.empty()) text += "; ";
    text += fmt::format("{} issued {}", ranks_phrase(ranks), what);
  }
  return text;
}

// "world seq 3" for a collective, "send 0->1 on pp 0 seq 4" for a transfer: communicators by
// the names users know (profiler::communicator_name), as analyze and top show them.
std::string where_of(const CollectiveFinding& f) {
  const std::string group = profiler::communicator_name(f.comm_id);
  if (f.sender >= 0) {
    return fmt::format("send {}->{} on {} {}", f.sender, f.receiver, group,
                       profiler::p2p_seq_text(f.seq));
  }
  return fmt::format("{} seq {}", group, f.seq);
}

// "send 0->1 on world/split2/color0/split0/color0 seq 4: missing ranks: rank 1 never posted the
// matching recv (send of 8.00 KiB float started on rank 0; rank 1's last recv on this channel was
// seq 3)"
std::string describe_transfer(const CollectiveFinding& f) {
  const std::string where = where_of(f);
  switch (f.kind) {
    case FindingKind::kMissingRanks: {
      const auto& [rank, posted] = f.issued.front();
      const int absent = f.missing.front();
      const std::string_view counterpart = posted.op == "send" ? "recv" : "send";
      const std::string last =
          f.missing_last_seq.front() < 0
              ? fmt::format("rank {} posted no {} on this channel", absent, counterpart)
              : fmt::format(
                    "rank {}'s last {} on this channel was {}", absent, counterpart,
                    profiler::p2p_seq_text(static_cast<uint64_t>(f.missing_last_seq.front())));
      const std::string tags =
          f.counterpart_tag
              ? fmt::format(
                    "; rank {} has a {} pending between the two with tag {}, this {} has "
                    "tag {}: they differ only by tag",
                    absent, counterpart, *f.counterpart_tag, posted.op, profiler::p2p_tag(f.seq))
              : std::string();
      return fmt::format(
          "{}: missing ranks: rank {} never posted the matching {} ({} of {} {} on rank {}; {}{})",
          where, absent, counterpart, posted.op, size_key(posted),
          profiler::collective_state_name(posted.state), rank, last, tags);
    }
    case FindingKind::kSizeMismatch:
      return fmt::format("{}: size mismatch: rank {} sends {}, rank {} receives {}", where,
                         f.sender, size_key(f.issued[0].second), f.receiver,
                         size_key(f.issued[1].second));
    default:
      return fmt::format("{}: posted on both sides but not completed ({})", where,
                         states_of(f.issued));
  }
}

std::string describe_finding(const CollectiveFinding& f) {
  if (f.sender >= 0) return describe_transfer(f);
  const std::string where = where_of(f);
  switch (f.kind) {
    case FindingKind::kOpMismatch:
      return fmt::format("{}: op mismatch: {}", where, describe_mismatch(f));
    case FindingKind::kSizeMismatch:
      return fmt::format("{}: size mismatch: {}", where, describe_mismatch(f));
    case FindingKind::kMissingRanks: {
      std::string last;
      for (size_t i = 0; i < f.missing.size(); ++i) {
        if (!last.empty()) last += ", ";
        last += f.missing_last_seq[i] < 0
                    ? fmt::format("rank {} issued none", f.missing[i])
                    : fmt::format("rank {}'s last was seq {}", f.missing[i], f.missing_last_seq[i]);
      }
      const CollectiveEvent& op = f.issued.front().second;
      return fmt::format(
          "{}: missing ranks: {} never issued {} of {} ({}; {} on this "
          "communicator)",
          where, ranks_phrase(f.missing), op.op, size_key(op), states_of(f.issued), last);
    }
    case FindingKind::kMatched:
      if (f.unfinished) {
        const CollectiveEvent& op = f.issued.front().second;
        std::vector<int> issuers;
        for (const auto& [rank, event] : f.issued) issuers.push_back(rank);
        // With every member's dump in hand and no process held, nobody is missing: the
        // transport is to blame.
        std::string cause;
        if (!f.held.empty()) {
          cause = fmt::format(": held by the process of {}", ranks_phrase(f.held));
        } else if (f.undumped.empty()) {
          cause = ": the transport failed or stalled";
        }
        return fmt::format("{}: {} of {} issued by {} but not completed ({}){}", where, op.op,
                           size_key(op), ranks_phrase(issuers), states_of(f.issued), cause);
      }
      return fmt::format("{}: {} collective(s) matched on {}, all completed",
                         profiler::communicator_name(f.comm_id), f.matched,
                         ranks_phrase(f.members));
  }
  return where;
}

// A rank the launcher resumed so that it could take its stop signal ran on for a moment: its
// records are read as they stood when it was resumed.
std::vector<FlightDump> as_before_resume(const std::vector<FlightDump>& dumps,
                                         const std::map<int, RankProcess>& processes) {
  std::vector<FlightDump> out = dumps;
  for (FlightDump& dump : out) {
    auto found = processes.find(dump.rank);
    if (found == processes.end() || found->second.resumed_ns <= 0) continue;
    const int64_t resumed = found->second.resumed_ns;
    const size_t before = dump.entries.size();
    std::erase_if(dump.entries, [&](const CollectiveEvent& e) { return e.enqueue_ns >= resumed; });
    dump.total_recorded -= std::min<uint64_t>(dump.total_recorded, before - dump.entries.size());
    for (CollectiveEvent& e : dump.entries) {
      if (e.end_ns < resumed) continue;
      e.state = e.start_ns > 0 && e.start_ns < resumed ? CollectiveState::kStarted
                                                       : CollectiveState::kEnqueued;
      e.end_ns = 0;
    }
    dump.dumped_ns = std::min(dump.dumped_ns, resumed);
  }
  return out;
}

}  // namespace

std::string_view finding_kind_name(FindingKind kind) {
  switch (kind) {
    case FindingKind::kMatched: return "matched";
    case FindingKind::kOpMismatch: return "op_mismatch";
    case FindingKind::kSizeMismatch: return "size_mismatch";
    case FindingKind::kMissingRanks: return "missing_ranks";
  }
  return "unknown";
}

FlightDiagnosis diagnose_flight_dumps(const std::vector<FlightDump>& given,
                                      const std::vector<RankProcess>& processes) {
  std::map<int, RankProcess> by_rank;
  for (const RankProcess& process : processes) by_rank[process.rank] = process;
  const std::vector<FlightDump> dumps = as_before_resume(given, by_rank);
  FlightDiagnosis diagnosis;
  for (const FlightDump& dump : dumps) {
    diagnosis.dumped_ranks.push_back(dump.rank);
    if (dump.trigger == DumpTrigger::kWatchdog) diagnosis.watchdog_ranks.push_back(dump.rank);
    if (dump.trigger == DumpTrigger::kCollectiveError) diagnosis.error_ranks.push_back(dump.rank);
  }
  for (std::vector<int>* ranks :
       {&diagnosis.dumped_ranks, &diagnosis.watchdog_ranks, &diagnosis.error_ranks}) {
    std::sort(ranks->begin(), ranks->end());
  }
  const FlightIndex index = index_flight_dumps(dumps);
  for (const auto& [id, record] : index.comms) {
    if (record.members.size() < 2) continue;  // a communicator of one rank cannot disagree
    diagnosis.findings.push_back(judge(id, record));
  }
  for (const auto& [key, record] : index.channels) {
    if (auto finding = judge_channel(key, record, index.by_rank)) {
      if (finding->kind == FindingKind::kMissingRanks) {
        finding->counterpart_tag = pending_on_another_tag(index, key, finding->missing.front());
      }
      diagnosis.findings.push_back(std::move(*finding));
    }
  }
  std::stable_sort(diagnosis.findings.begin(), diagnosis.findings.end(),
                   [](const CollectiveFinding& a, const CollectiveFinding& b) {
                     return is_problem(a) && !is_problem(b);
                   });
  diagnosis.waits = build_wait_for_graph(index, by_rank);
  for (CollectiveFinding& f : diagnosis.findings) {
    if (f.kind != FindingKind::kMatched || !f.unfinished) continue;
    for (int member : f.members) {
      if (process_is_held(index, by_rank, member)) f.held.push_back(member);
    }
  }
  // A mismatch is a cause by itself (the others wait because of it): its minority first.
  std::set<int> mismatched;
  for (const CollectiveFinding& f : diagnosis.findings) {
    if (f.kind == FindingKind::kOpMismatch || f.kind == FindingKind::kSizeMismatch) {
      mismatched.insert(f.culprits.begin(), f.culprits.end());
    }
  }
  if (mismatched.size() == 1) {
    diagnosis.culprit = *mismatched.begin();
  } else if (diagnosis.waits.culprit) {
    diagnosis.culprit = diagnosis.waits.roots[*diagnosis.waits.culprit].rank;
  }
  return diagnosis;
}

std::string diagnosis_headline(const FlightDiagnosis& diagnosis) {
  for (const CollectiveFinding& f : diagnosis.findings) {
    if (is_problem(f)) return describe_finding(f);
  }
  return "";
}

namespace {

// "(op_mismatch at world seq 3): world seq 3: op mismatch: ..." for the minority of a mismatch,
// "(stopped at world/split1/color0 seq 3): its process was stopped ..." for a root.
std::string culprit_evidence(const FlightDiagnosis& d) {
  const int culprit = *d.culprit;
  for (const CollectiveFinding& f : d.findings) {
    if (f.kind != FindingKind::kOpMismatch && f.kind != FindingKind::kSizeMismatch) continue;
    if (std::find(f.culprits.begin(), f.culprits.end(), culprit) == f.culprits.end()) continue;
    return fmt::format("({} at {}): {}", finding_kind_name(f.kind), where_of(f),
                       describe_finding(f));
  }
  for (const WaitRoot& root : d.waits.roots) {
    if (root.rank != culprit) continue;
    return fmt::format("({}): {}", root_kind_and_where(d.waits, root),
                       describe_root(d.waits, root));
  }
  return "";
}

// A missing rank that waits itself on another communicator is not the cause: said beside it.
std::string own_waits_of_missing(const FlightDiagnosis& d, const CollectiveFinding& f) {
  std::string text;
  for (int rank : f.missing) {
    const std::string own = describe_own_wait(d.waits, rank);
    if (!own.empty()) text += "; " + own;
  }
  return text;
}

}  // namespace

std::vector<std::vector<profiler::FlightDump>> dumps_by_attempt(
    std::vector<profiler::FlightDump> dumps) {
  std::stable_sort(dumps.begin(), dumps.end(),
                   [](const profiler::FlightDump& a, const profiler::FlightDump& b) {
                     return std::pair(a.attempt, a.rank) < std::pair(b.attempt, b.rank);
                   });
  std::vector<std::vector<profiler::FlightDump>> attempts;
  for (profiler::FlightDump& dump : dumps) {
    if (attempts.empty() || attempts.back().front().attempt != dump.attempt)
      attempts.emplace_back();
    attempts.back().push_back(std::move(dump));
  }
  return attempts;
}

bool diagnosis_called_for(const std::vector<profiler::FlightDump>& dumps) {
  const bool failed = std::any_of(dumps.begin(), dumps.end(), [](const profiler::FlightDump& d) {
    return d.trigger == profiler::DumpTrigger::kWatchdog ||
           d.trigger == profiler::DumpTrigger::kCollectiveError;
  });
  if (failed) return true;
  // The ranks issued different collectives at one seq: however young, never an ordinary stop. A
  // transport that reads the mismatch aborts the rank at once (gloo's enforce on a size
  // mismatch: SIGABRT), before any watchdog or 5 s stall, and the others are stopped mid-wait.
  const FlightDiagnosis diagnosis = diagnose_flight_dumps(dumps);
  if (std::any_of(
          diagnosis.findings.begin(), diagnosis.findings.end(), [](const CollectiveFinding& f) {
            return f.kind == FindingKind::kOpMismatch || f.kind == FindingKind::kSizeMismatch;
          })) {
    return true;
  }
  // A run stopped by hand (Ctrl-C on a job that stopped making progress, a scheduler's SIGTERM)
  // without --collective-timeout: a rank that had waited in a collective for kStalledNs when it
  // dumped was stuck there, and who never came is what the user wants to know (py-spy's
  // question, answered from the records).
  return std::any_of(dumps.begin(), dumps.end(), [](const profiler::FlightDump& d) {
    if (d.trigger != profiler::DumpTrigger::kSignal) return false;
    return std::any_of(d.entries.begin(), d.entries.end(), [&](const profiler::CollectiveEvent& e) {
      const bool unfinished = e.state == profiler::CollectiveState::kEnqueued ||
                              e.state == profiler::CollectiveState::kStarted;
      return unfinished && d.dumped_ns - e.enqueue_ns >= kStalledNs;
    });
  });
}

namespace {

// "ranks 0,1 wait on each other, ...": the verdict of a cycle in the wait-for graph.
std::string deadlock_verdict(const WaitForGraph& waits) {
  return fmt::format(
      "{} wait on each other, none of them at the root: the ranks issue their collectives in "
      "different orders",
      ranks_phrase(waits.deadlocked));
}

}  // namespace

std::string diagnosis_statement(const FlightDiagnosis& diagnosis) {
  if (diagnosis.culprit) {
    return fmt::format("rank {} {}", *diagnosis.culprit, culprit_evidence(diagnosis));
  }
  // A cycle: one side's "never issued" alone would blame that side.
  if (!diagnosis.waits.deadlocked.empty()) {
    return fmt::format("{} ({})", deadlock_verdict(diagnosis.waits),
                       fmt::join(describe_waits(diagnosis.waits), "; "));
  }
  return diagnosis_headline(diagnosis);
}

std::string format_flight_diagnosis(const FlightDiagnosis& d) {
  std::string text =
      fmt::format("partrain: flight recorder: dumps of {}", ranks_phrase(d.dumped_ranks));
  if (!d.watchdog_ranks.empty()) {
    text += fmt::format("; the collective watchdog fired on {}", ranks_phrase(d.watchdog_ranks));
  }
  if (!d.error_ranks.empty()) {
    text += fmt::format("; a collective failed on {}", ranks_phrase(d.error_ranks));
  }
  text += "\n";
  std::set<int> undumped;
  for (const CollectiveFinding& f : d.findings) {
    text += fmt::format("partrain: diagnosis: {}{}\n", describe_finding(f),
                        own_waits_of_missing(d, f));
    undumped.insert(f.undumped.begin(), f.undumped.end());
  }
  if (d.findings.empty()) text += "partrain: diagnosis: no collective of several ranks recorded\n";
  if (!undumped.empty()) {
    text += fmt::format(
        "partrain: diagnosis: nothing is known of {} (no dump: on another node, killed "
        "before it could write one, or started by the traced program rather than by partrain, "
        "which then cannot ask it for one)\n",
        ranks_phrase(std::vector<int>(undumped.begin(), undumped.end())));
  }
  for (const std::string& line : describe_waits(d.waits)) {
    text += fmt::format("partrain: waits: {}\n", line);
  }
  if (!d.waits.deadlocked.empty()) {
    text += fmt::format("partrain: diagnosis: {}\n", deadlock_verdict(d.waits));
  }
  if (d.culprit) {
    text += fmt::format("partrain: culprit: rank {} {}\n", *d.culprit, culprit_evidence(d));
  } else if (d.waits.roots.size() > 1) {
    std::vector<int> roots;
    for (const WaitRoot& root : d.waits.roots) roots.push_back(root.rank);
    text += fmt::format("partrain: diagnosis: the waits lead to {}, none alone at the root\n",
                        ranks_phrase(roots));
  }
  return text;
}

}  // namespace partrain::launch
