// The integer codes and fixed words the trace's raw tables store for the profiler's enums
// (share/schema.sql: the lookup tables, the collective.state comment, the CHECKed texts of
// run.status and stat.severity), decoded in one place: readers hand out enums, and no file
// outside the store and this reader spells a code. The writer stores the enums' values.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "profiler/collective_event.h"
#include "profiler/trace_event.h"

namespace partrain::profiler {

// nullopt for a code this build does not know (a newer writer's). Slice categories and
// collective states inline: the analyses decode every slice and op; the codes are the enums'
// values, kPhase and kFailed the last (trace_codes.cpp checks both).
inline std::optional<SliceCategory> slice_category_from_code(int64_t code) {
  if (code < 0 || code > static_cast<int64_t>(SliceCategory::kPhase)) return std::nullopt;
  return static_cast<SliceCategory>(code);
}
std::optional<TrackKind> track_kind_from_code(int64_t code);
inline std::optional<CollectiveState> collective_state_from_code(int64_t code) {
  if (code < 0 || code > static_cast<int64_t>(CollectiveState::kFailed)) return std::nullopt;
  return static_cast<CollectiveState>(code);
}
std::optional<RunStatus> run_status_from_name(std::string_view name);
std::optional<StatSeverity> stat_severity_from_name(std::string_view name);

// Memory samples' categories are memory::Category's values (MemorySample.category); the
// profiler does not see that enum, only how many there are and that the last is `other`.
inline constexpr uint8_t kMemoryCategoryCount = 7;
// A code this build does not know reads as `other`, as the writer stores one. Inline: the memory
// pass decodes every sample.
inline uint8_t memory_category_from_code(int64_t code) {
  constexpr uint8_t kOther = kMemoryCategoryCount - 1;
  return code >= 0 && code < kMemoryCategoryCount ? static_cast<uint8_t>(code) : kOther;
}

}  // namespace partrain::profiler
