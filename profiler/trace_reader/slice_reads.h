// Reading the slices: a rank's slices in order of start over a stretch of time (the breakdown's
// sweep), the pipeline's forward and backward phases, and the time of named compute slices.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/trace_event.h"
#include "profiler/trace_reader/row_cursor.h"
#include "profiler/trace_reader/step_reads.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::profiler {

struct SliceSpan {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  SliceCategory category = SliceCategory::kCompute;
  int64_t name_id = -1;  // the name's string id (TraceReader::string)
};

class SliceCategorySet {
 public:
  SliceCategorySet() = default;
  SliceCategorySet(std::initializer_list<SliceCategory> categories) {
    for (SliceCategory c : categories) bits_ |= 1u << static_cast<unsigned>(c);
  }
  bool contains(SliceCategory c) const { return (bits_ >> static_cast<unsigned>(c)) & 1u; }

 private:
  uint32_t bits_ = 0;
};

// The slices of one rank that overlap [from, to), by start: each of its tracks (memory tracks
// aside) walked in time order along the slice_track_ts index, merged. Holds a row per track.
// A traced process's lifetime slice (the phase named "process") is not among them.
class RankSliceCursor {
 public:
  // A track's query and its next slice of the wanted categories.
  struct Track {
    SqliteStatement stmt;
    SliceSpan head;
  };
  RankSliceCursor(const SqliteDb& db, int rank, std::vector<Track> tracks,
                  SliceCategorySet categories, int64_t lifetime_name)
      : db_(&db),
        rank_(rank),
        tracks_(std::move(tracks)),
        categories_(categories),
        lifetime_name_(lifetime_name) {}
  // False at the end or on an error (status()).
  bool next(SliceSpan& slice);
  const Status& status() const { return status_; }

 private:
  const SqliteDb* db_;
  int rank_;
  std::vector<Track> tracks_;  // those with a head; one that runs out is removed
  SliceCategorySet categories_;
  int64_t lifetime_name_;  // the process-lifetime slice's name id (skipped), -1: none
  Status status_;
};

// `only`: the tracks of that kind alone (kCudaStream: the rank's GPU work).
StatusOr<RankSliceCursor> rank_slices(const TraceReader& reader, int rank, int64_t from,
                                      int64_t to, SliceCategorySet categories,
                                      std::optional<TrackKind> only = std::nullopt);

// A forward, backward or weight phase slice (the pipeline schedule's actions; weight: the
// weight-gradient pass of a zero-bubble schedule's split backward, not forward).
struct PipelineAction {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  bool forward = true;
  int micro_batch = -1;  // -1: not recorded
  bool weight = false;
};

// The forward, backward and weight phase slices of one rank that start in [from, to), by start;
// over() chooses another stretch and reads it from its start.
class PipelineActionCursor : public RowCursor {
 public:
  using RowCursor::RowCursor;
  void over(int64_t from, int64_t to);
  bool next(PipelineAction& action);
};

StatusOr<PipelineActionCursor> pipeline_actions(const TraceReader& reader, int rank);

// Per rank, the summed duration of the compute slices called `name` in the steps of `steps`
// (from its from_ns on).
StatusOr<std::map<int, int64_t>> compute_time_by_rank(const TraceReader& reader,
                                                      std::string_view name, StepFilter steps);

}  // namespace partrain::profiler
