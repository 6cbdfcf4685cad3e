// Reading a trace while it is written: whether anything was committed since the last look
// (PRAGMA data_version), one read transaction so every table is read at the same commit
// (ReadSnapshot), and the slices stored after a given id. A live trace has no secondary index
// (docs/trace-format.md, "Indexes built at close"), so these are rowid ranges and primary-key
// lookups, never scans: a reader that remembers where it stopped reads only what arrived.
#pragma once

#include <cstdint>
#include <optional>

#include "core/status.h"
#include "profiler/trace_event.h"
#include "profiler/trace_reader/collective_reads.h"
#include "profiler/trace_reader/row_cursor.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::profiler {

// Changes whenever another connection commits to the trace (never by this one's reads).
StatusOr<int64_t> data_version(const TraceReader& reader);

// A read transaction: every read until end() (or destruction) sees the same commit.
class ReadSnapshot {
 public:
  static StatusOr<ReadSnapshot> begin(const TraceReader& reader);
  ReadSnapshot(ReadSnapshot&& other) noexcept : reader_(other.reader_) { other.reader_ = nullptr; }
  ReadSnapshot& operator=(ReadSnapshot&&) = delete;
  ~ReadSnapshot();
  Status end();

 private:
  explicit ReadSnapshot(const TraceReader& reader) : reader_(&reader) {}
  const TraceReader* reader_;
};

// A slice as stored, and its collective row when it is a collective or p2p op.
struct StoredSlice {
  int64_t id = 0;
  int rank = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::optional<SliceCategory> category;  // nullopt: a code this build does not know
  int64_t name_id = -1;                   // the name's string id (TraceReader::string)
  bool is_collective = false;
  // When is_collective: what matching it across ranks needs (comm_id, seq, op, bytes, peer,
  // group size, host and GPU times); its group_ranks and state are not read (every column
  // costs on every slice of a refresh).
  CollectiveOp collective;
};

// Slices with id in (after, upto], by id (a collective row shares its slice's id: one
// primary-key probe per slice). Slices whose track is unknown are left out.
class StoredSliceCursor : public RowCursor {
 public:
  StoredSliceCursor(const TraceReader& reader, SqliteStatement stmt)
      : RowCursor(reader.db(), std::move(stmt), "reading new slices"), reader_(&reader) {}
  bool next(StoredSlice& slice);

 private:
  const TraceReader* reader_;
};

StatusOr<StoredSliceCursor> slices_stored_between(const TraceReader& reader, int64_t after,
                                                  int64_t upto);
// A finished trace (slice_track_ts built at close) can also be read by time, which matters
// where ids are not time: an import writes rank by rank, and its newest ids are the last
// rank's whole run.
StatusOr<bool> slices_indexed_by_time(const TraceReader& reader);
// The latest start with at least `count` slices starting at or after it (the first slice's start
// when the trace has fewer). Needs slice_track_ts: a binary search of counts along it.
StatusOr<int64_t> newest_slices_start(const TraceReader& reader, int64_t count);
// Slices starting at or after `since_ns` with id <= `upto`, by start. Needs slice_track_ts.
StatusOr<StoredSliceCursor> slices_started_since(const TraceReader& reader, int64_t since_ns,
                                                 int64_t upto);
// The id of the latest slice (0 for none).
StatusOr<int64_t> last_slice_id(const TraceReader& reader);

}  // namespace partrain::profiler
