#include "profiler/trace_reader/damaged_rows.h"

#include <fmt/format.h>

#include <map>
#include <utility>

#include "profiler/trace_reader/step_reads.h"

namespace partrain::profiler {
namespace {

Status count_unusable_steps(const TraceReader& reader, std::vector<DamagedRows>& out) {
  ASSIGN_OR_RETURN(SqliteStatement stmt,
                   reader.prepare(fmt::format("SELECT rank, count(*) FROM step WHERE {} AND NOT {} "
                                              "GROUP BY rank ORDER BY rank",
                                              last_attempt_steps(reader), kUsableStepDuration)));
  return reader.each_row(stmt, "checking the steps", [&](const SqliteStatement& row) {
    out.push_back({"step_duration_unusable", static_cast<int>(row.column_int(0)), row.column_int(1),
                   "step rows whose duration is zero, negative or not a number: left out of the "
                   "steps, the window and every figure computed from them"});
  });
}

// Strings the rows name that the string table lost (lost_strings.h); the scan of every
// referencing column is paid only when the ids show a gap.
Status count_lost_strings(const TraceReader& reader, std::vector<DamagedRows>& out) {
  const StatusOr<int64_t> counted = lost_string_count(reader.db());
  if (!counted.is_ok()) return reader.read_error("checking the strings");
  if (const int64_t lost = *counted; lost > 0) {
    out.push_back({"strings_lost", std::nullopt, lost,
                   "strings the trace's rows name but its string table lost (the file was "
                   "damaged): read as '(lost string N)', N the string's id"});
  }
  return Status::ok();
}

Status count_unknown_track_kinds(const TraceReader& reader, std::vector<DamagedRows>& out) {
  ASSIGN_OR_RETURN(const std::vector<TrackRow> tracks, reader.tracks());
  ASSIGN_OR_RETURN(SqliteStatement slices,
                   reader.prepare("SELECT count(*) FROM slice WHERE track_id = ?1"));
  std::map<int, std::pair<int64_t, int64_t>> by_rank;  // rank -> tracks, their slices
  for (const TrackRow& track : tracks) {
    if (track.kind) continue;
    slices.bind(1, track.id);
    if (slices.step() != SQLITE_ROW) return reader.read_error("checking the tracks");
    auto& [count, rows] = by_rank[track.rank];
    ++count;
    rows += slices.column_int(0);
    slices.reset();
  }
  for (const auto& [rank, counts] : by_rank) {
    out.push_back({"track_kind_unknown", rank, counts.second,
                   fmt::format("slices on {} track(s) whose kind code no partrain writes (the file "
                               "was damaged): left out of the analyses",
                               counts.first)});
  }
  return Status::ok();
}

Status count_unusable_collectives(const TraceReader& reader, std::vector<DamagedRows>& out) {
  struct Counts {
    int64_t reversed = 0, bytes = 0, group = 0;
  };
  std::map<int, Counts> by_rank;
  ASSIGN_OR_RETURN(
      SqliteStatement stmt,
      reader.prepare(fmt::format(
          "SELECT t.rank, sum({0} IS 1), sum({1} IS 1), sum({2} IS 1) FROM collective c "
          "JOIN slice s ON s.id = c.slice_id JOIN track t ON t.id = s.track_id "
          "WHERE {0} OR {1} OR {2} GROUP BY t.rank",
          kReversedGpuSpan, kUnusableBytes, kUnusableGroupSize)));
  RETURN_IF_ERROR(
      reader.each_row(stmt, "checking the collectives", [&](const SqliteStatement& row) {
        by_rank[static_cast<int>(row.column_int(0))] = {row.column_int(1), row.column_int(2),
                                                        row.column_int(3)};
      }));
  // The group_ranks texts: a few, listed first so one statement is open at a time.
  ASSIGN_OR_RETURN(SqliteStatement texts,
                   reader.prepare("SELECT id, value FROM string WHERE id IN "
                                  "(SELECT group_ranks_id FROM collective)"));
  std::vector<int64_t> unreadable;
  RETURN_IF_ERROR(
      reader.each_row(texts, "checking the collectives", [&](const SqliteStatement& row) {
        if (!readable_group_ranks(row.column_text(1))) unreadable.push_back(row.column_int(0));
      }));
  ASSIGN_OR_RETURN(
      SqliteStatement ranks,
      reader.prepare(fmt::format("SELECT t.rank, count(*) FROM collective c JOIN slice s ON s.id "
                                 "= c.slice_id JOIN track t ON t.id = s.track_id WHERE "
                                 "c.group_ranks_id = ?1 AND ({} IS NOT 1) GROUP BY t.rank",
                                 kUnusableGroupSize)));
  for (int64_t id : unreadable) {
    ranks.bind(1, id);
    RETURN_IF_ERROR(
        reader.each_row(ranks, "checking the collectives", [&](const SqliteStatement& row) {
          by_rank[static_cast<int>(row.column_int(0))].group += row.column_int(1);
        }));
    ranks.reset();
  }
  for (const auto& [rank, counts] : by_rank) {
    if (counts.reversed > 0) {
      out.push_back({"collective_gpu_span_reversed", rank, counts.reversed,
                     "collectives whose GPU end precedes their GPU start: timed by their host "
                     "span instead"});
    }
    if (counts.bytes > 0) {
      out.push_back({"collective_bytes_negative", rank, counts.bytes,
                     "collectives with a negative byte count: their size and bandwidth read as "
                     "not recorded"});
    }
    if (counts.group > 0) {
      out.push_back({"collective_group_unusable", rank, counts.group,
                     "collectives whose group size is negative or above the run's world size, "
                     "or whose group_ranks name a negative or unreadable rank: their group reads "
                     "as not recorded"});
    }
  }
  return Status::ok();
}

}  // namespace

bool readable_group_ranks(std::string_view text) {
  bool digit_before = false;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      digit_before = true;
    } else if (c == ',' && digit_before) {
      digit_before = false;
    } else {
      return false;
    }
  }
  return digit_before;
}

StatusOr<std::vector<DamagedRows>> damaged_rows(const TraceReader& reader) {
  std::vector<DamagedRows> out;
  RETURN_IF_ERROR(count_unusable_steps(reader, out));
  RETURN_IF_ERROR(count_lost_strings(reader, out));
  RETURN_IF_ERROR(count_unknown_track_kinds(reader, out));
  RETURN_IF_ERROR(count_unusable_collectives(reader, out));
  return out;
}

}  // namespace partrain::profiler
