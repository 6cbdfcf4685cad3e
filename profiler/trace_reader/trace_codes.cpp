#include "profiler/trace_reader/trace_codes.h"

#include <array>

namespace partrain::profiler {
namespace {

constexpr std::array kSliceCategories = {
    SliceCategory::kCompute, SliceCategory::kCollective, SliceCategory::kP2p,
    SliceCategory::kKernel,  SliceCategory::kMemcpy,     SliceCategory::kMemset,
    SliceCategory::kSync,    SliceCategory::kStep,       SliceCategory::kPhase};
constexpr std::array kTrackKinds = {TrackKind::kCpuThread, TrackKind::kCudaStream,
                                    TrackKind::kComm, TrackKind::kMemory, TrackKind::kCounter};
// collective.state: 0 enqueued, 1 started, 2 completed, 3 failed (share/schema.sql).
constexpr std::array kCollectiveStates = {CollectiveState::kEnqueued, CollectiveState::kStarted,
                                          CollectiveState::kCompleted, CollectiveState::kFailed};
constexpr std::array kRunStatuses = {RunStatus::kRunning, RunStatus::kCompleted,
                                     RunStatus::kFailed, RunStatus::kKilled,
                                     RunStatus::kIncomplete};
constexpr std::array kSeverities = {StatSeverity::kInfo, StatSeverity::kDataLoss,
                                    StatSeverity::kError};

// The code is the enum's position in the schema's table, which is also its value.
template <typename Enum, size_t N>
constexpr bool codes_are_values(const std::array<Enum, N>& values) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(values[i]) != i) return false;
  }
  return true;
}
static_assert(codes_are_values(kSliceCategories) && codes_are_values(kTrackKinds) &&
              codes_are_values(kCollectiveStates));
static_assert(kSliceCategories.back() == SliceCategory::kPhase &&
              kCollectiveStates.back() == CollectiveState::kFailed);  // the inline decoders

template <typename Enum, size_t N>
std::optional<Enum> decode(const std::array<Enum, N>& values, int64_t code) {
  if (code < 0 || code >= static_cast<int64_t>(N)) return std::nullopt;
  return values[static_cast<size_t>(code)];
}

template <typename Enum, size_t N, typename Name>
std::optional<Enum> by_name(const std::array<Enum, N>& values, std::string_view name,
                            Name name_of) {
  for (Enum value : values) {
    if (name_of(value) == name) return value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<TrackKind> track_kind_from_code(int64_t code) { return decode(kTrackKinds, code); }

std::optional<RunStatus> run_status_from_name(std::string_view name) {
  return by_name(kRunStatuses, name, run_status_name);
}

std::optional<StatSeverity> stat_severity_from_name(std::string_view name) {
  return by_name(kSeverities, name, stat_severity_name);
}

}  // namespace partrain::profiler
