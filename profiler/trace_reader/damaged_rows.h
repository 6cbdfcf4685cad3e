// Rows of a trace whose values cannot be true (a damaged file, an edited one, a writer's bug): a
// step that ends before it starts, a collective whose GPU end precedes its start or whose size is
// negative, a group larger than the world, a row naming a string its table lost, a track of a
// kind no build knows. The reads of this folder never hand such a value out as a fact (they leave
// the row out or read the value as not recorded, as each condition below says), and
// damaged_rows() counts them, so that the analyses report them as data loss instead of printing
// impossible numbers or losing rows without a word.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::profiler {

// What the reads could not use, per rank where the rows have one (nullopt: the whole trace).
struct DamagedRows {
  std::string name;  // "step_duration_unusable", "strings_lost", ...
  std::optional<int> rank;
  int64_t rows = 0;  // rows (strings for strings_lost, tracks for track_kind_unknown)
  std::string description;
};

// Every kind of damage the trace holds, by name then rank; none for a whole trace. Costs a scan
// of the step and collective tables; the string scan is paid only when the string ids show a gap.
StatusOr<std::vector<DamagedRows>> damaged_rows(const TraceReader& reader);

// The conditions, written once: the reads use them, damaged_rows counts their failures.
// A step row the analyses use: a duration stored as a positive integer (on `step`/`steps`).
inline constexpr std::string_view kUsableStepDuration =
    "(typeof(dur_ns) = 'integer' AND dur_ns > 0)";
// A collective `c` whose GPU span is backwards: its GPU times read as not recorded (the host
// span stands in, as for an op the GPU did not time).
inline constexpr std::string_view kReversedGpuSpan = "(c.gpu_end_ns < c.gpu_start_ns)";
// A collective `c` whose byte count is negative: its size reads as not recorded.
inline constexpr std::string_view kUnusableBytes = "(c.bytes < 0)";
// A collective `c` whose group size is negative or above the run's world size: it reads as not
// recorded (0).
inline constexpr std::string_view kUnusableGroupSize =
    "(c.group_size < 0 OR c.group_size > (SELECT world_size FROM run WHERE world_size > 0 "
    "LIMIT 1))";
// A group_ranks text ("0,1,2,3") of world ranks: digits and single commas, nothing else. Any
// other (a negative rank, a word, an empty item) reads as not recorded.
bool readable_group_ranks(std::string_view text);
// The text a row's string id reads as when the string table lost it; `partrain merge` writes
// the same text in its place.
std::string lost_string_text(int64_t id);
// The same text in SQL, of the string id the expression `id` gives.
std::string lost_string_text_sql(std::string_view id);
// A string table that lost rows (ids a writer hands out one after another are missing, or none
// is left) leaves rows naming strings that are not there. The rule, for the reads here and for
// `partrain merge` (stat merge_lost_strings), on the database attached as `schema`:
// SQL of one row, 1 when its string table is whole (then no row can name a lost string) ...
std::string string_table_whole_sql(std::string_view schema);
// ... and SQL of the distinct string ids (column `id`) its rows name that its string table lacks:
// a scan of every column holding a string id that `db` has in `schema` (older files lack some).
std::string lost_string_ids_sql(const SqliteDb& db, std::string_view schema);

}  // namespace partrain::profiler
