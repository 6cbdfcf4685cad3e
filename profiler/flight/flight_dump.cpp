#include "profiler/flight/flight_dump.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <span>
#include <utility>

#include "core/byte_size.h"
#include "core/duration.h"
#include "core/json_dump.h"
#include "profiler/p2p_seq.h"
#include "profiler/trace_event.h"
#include "profiler/trace_reader/communicator_name.h"

namespace partrain::profiler {
namespace {

constexpr int kFormatVersion = 1;

constexpr std::pair<CollectiveState, std::string_view> kStates[] = {
    {CollectiveState::kEnqueued, "enqueued"},
    {CollectiveState::kStarted, "started"},
    {CollectiveState::kCompleted, "completed"},
    {CollectiveState::kFailed, "failed"}};
constexpr std::pair<DumpTrigger, std::string_view> kTriggers[] = {
    {DumpTrigger::kWatchdog, "watchdog"},
    {DumpTrigger::kCollectiveError, "collective_error"},
    {DumpTrigger::kRankError, "rank_error"},
    {DumpTrigger::kSignal, "signal"}};

// CollectiveEvent holds names as views of the trace's fixed vocabularies: map a read name back
// onto the vocabulary's own storage.
std::string_view intern(std::span<const std::string_view> names, const std::string& name,
                        std::string_view other) {
  auto found = std::find(names.begin(), names.end(), name);
  return found == names.end() ? other : *found;
}

bool unfinished(const CollectiveEvent& e) {
  return e.state == CollectiveState::kEnqueued || e.state == CollectiveState::kStarted;
}

std::string describe_entry(const CollectiveEvent& e, int64_t dumped_ns) {
  // A transfer's seq may carry its tag (p2p_seq.h): "seq 0 (tag 5) send".
  std::string text =
      fmt::format("  {} {} {}", communicator_name(e.comm_id), seq_text(e.op, e.seq), e.op);
  if (e.peer >= 0) text += fmt::format(" peer {}", e.peer);
  text += fmt::format(" {} {} {}", format_bytes(e.bytes), e.dtype,
                      profiler::collective_state_name(e.state));
  if (unfinished(e)) {
    const int64_t since = e.state == CollectiveState::kStarted ? e.start_ns : e.enqueue_ns;
    text += fmt::format(" {} ago", format_duration(Nanoseconds(dumped_ns - since)));
  } else {
    text += fmt::format(" in {}", format_duration(Nanoseconds(e.end_ns - e.start_ns)));
  }
  return text;
}

}  // namespace

std::string_view dump_trigger_name(DumpTrigger trigger) {
  for (const auto& [value, name] : kTriggers) {
    if (value == trigger) return name;
  }
  return "unknown";
}

std::string flight_dump_to_json(const FlightDump& dump) {
  nlohmann::json entries = nlohmann::json::array();
  for (const CollectiveEvent& e : dump.entries) {
    entries.push_back({{"comm_id", e.comm_id},
                       {"seq", e.seq},
                       {"op", e.op},
                       {"dtype", e.dtype},
                       {"reduce_op", e.reduce_op},
                       {"count", e.count},
                       {"bytes", e.bytes},
                       {"peer", e.peer},
                       {"comm_rank", e.rank},
                       {"group_ranks", e.group_ranks},
                       {"enqueue_ns", e.enqueue_ns},
                       {"start_ns", e.start_ns},
                       {"end_ns", e.end_ns},
                       {"state", profiler::collective_state_name(e.state)}});
  }
  nlohmann::json j = {{"partrain_flight_dump", kFormatVersion},
                      {"rank", dump.rank},
                      {"attempt", dump.attempt},
                      {"trigger", dump_trigger_name(dump.trigger)},
                      {"reason", dump.reason},
                      {"dumped_ns", dump.dumped_ns},
                      {"total_recorded", dump.total_recorded},
                      {"after_program_end", dump.after_program_end},
                      {"entries", std::move(entries)}};
  return dump_json(j) + "\n";
}

StatusOr<FlightDump> flight_dump_from_json(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("partrain_flight_dump")) {
    return make_status(StatusCode::kUnreadable, "not a partrain flight-recorder dump");
  }
  try {
    FlightDump dump;
    dump.rank = j.at("rank").get<int>();
    dump.attempt = j.value("attempt", 0);  // absent from dumps made before restarts were told
    const std::string trigger = j.at("trigger").get<std::string>();
    bool known = false;
    for (const auto& [value, name] : kTriggers) {
      if (name == trigger) {
        dump.trigger = value;
        known = true;
      }
    }
    if (!known) {
      return make_status(StatusCode::kUnreadable, "flight dump: unknown trigger '{}'", trigger);
    }
    dump.reason = j.at("reason").get<std::string>();
    dump.dumped_ns = j.at("dumped_ns").get<int64_t>();
    dump.total_recorded = j.at("total_recorded").get<uint64_t>();
    dump.after_program_end = j.value("after_program_end", false);  // absent before 2026-11-30
    for (const auto& item : j.at("entries")) {
      CollectiveEvent e;
      e.comm_id = item.at("comm_id").get<std::string>();
      e.seq = item.at("seq").get<uint64_t>();
      e.op = intern(profiler::collective_op_names(), item.at("op").get<std::string>(), "other");
      e.dtype =
          intern(profiler::collective_dtype_names(), item.at("dtype").get<std::string>(), "other");
      e.reduce_op =
          intern(profiler::reduce_op_names(), item.at("reduce_op").get<std::string>(), "other");
      e.count = item.at("count").get<uint64_t>();
      e.bytes = item.at("bytes").get<uint64_t>();
      e.peer = item.at("peer").get<int>();
      e.rank = item.at("comm_rank").get<int>();
      e.group_ranks = item.at("group_ranks").get<std::vector<int>>();
      e.enqueue_ns = item.at("enqueue_ns").get<int64_t>();
      e.start_ns = item.at("start_ns").get<int64_t>();
      e.end_ns = item.at("end_ns").get<int64_t>();
      const std::string state = item.at("state").get<std::string>();
      known = false;
      for (const auto& [value, name] : kStates) {
        if (name == state) {
          e.state = value;
          known = true;
        }
      }
      if (!known) {
        return make_status(StatusCode::kUnreadable, "flight dump: unknown state '{}'", state);
      }
      dump.entries.push_back(std::move(e));
    }
    return dump;
  } catch (const nlohmann::json::exception& e) {
    return make_status(StatusCode::kUnreadable, "malformed flight-recorder dump: {}", e.what());
  }
}

std::string format_flight_dump(const FlightDump& dump, size_t last_n) {
  std::string text = fmt::format(
      "flight recorder of rank {} ({}: {}); {} of its {} operations kept, the last {} and every "
      "unfinished one:\n",
      dump.rank, dump_trigger_name(dump.trigger), dump.reason, dump.entries.size(),
      dump.total_recorded, std::min(last_n, dump.entries.size()));
  const size_t first_recent = dump.entries.size() > last_n ? dump.entries.size() - last_n : 0;
  for (size_t i = 0; i < dump.entries.size(); ++i) {
    if (i < first_recent && !unfinished(dump.entries[i])) continue;
    text += describe_entry(dump.entries[i], dump.dumped_ns) + "\n";
  }
  return text;
}

}  // namespace partrain::profiler
