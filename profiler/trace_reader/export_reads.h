// Reading what `partrain export` writes: the rows a selection of ranks and steps keeps, with
// names as the public views give them (docs/trace-format.md), each kind streamed by one query in
// the order the exporter writes it, so a trace of 10^8 events never sits in memory.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "profiler/trace_reader/row_cursor.h"
#include "profiler/trace_reader/step_reads.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::profiler {

// The rows an export keeps: the ranks (empty: all) and, by step, the steps' time window (rows
// without a step are kept when they overlap it).
struct ExportSelection {
  std::vector<int> ranks;
  bool by_step = false;
  int64_t first_step = 0, last_step = 0;
  int64_t window_start = 0, window_end = 0;
  // Where a restarted job's earlier attempts' steps ended: slices of the selected step numbers
  // before it are an earlier attempt's, which reuses the numbers (the lowest int64 when none).
  int64_t earlier_attempts_end = std::numeric_limits<int64_t>::min();
};

// Earliest start to latest end of the steps first..last of the selected ranks (the last torchrun
// attempt's, step_reads.h); nullopt when they recorded none of those steps.
StatusOr<std::optional<EventSpan>> selected_steps_window(const TraceReader& reader,
                                                         const ExportSelection& selection);
// The lowest and highest step the selected ranks recorded in the last attempt; nullopt for none.
StatusOr<std::optional<std::pair<int64_t, int64_t>>> selected_step_numbers(
    const TraceReader& reader, const ExportSelection& selection);

struct ExportTrack {
  int rank = 0;
  std::string kind;  // cpu_thread, cuda_stream, comm, memory
  std::string name;
};
// The selected ranks' tracks (counter tracks aside) by rank, then cpu threads, cuda streams,
// communicators and memory, then name.
StatusOr<std::vector<ExportTrack>> export_tracks(const TraceReader& reader,
                                                 const ExportSelection& selection);

// A column of a slice's detail row, by its name in the views (correlation_id by Kineto's,
// correlation, which HTA reads); NULLs are left out.
struct ExportArg {
  std::string_view name;
  bool text = false;
  int64_t number = 0;
  std::string value;  // when text
};

struct ExportSlice {
  int rank = 0;
  std::string track_kind;
  std::string track;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
  std::string name;
  std::string category;
  std::optional<int64_t> step, micro_batch, layer;
  std::vector<ExportArg> args;  // the detail row's columns
};

// Which slices a pass reads: those with no detail row, or those of one detail table with its
// columns (collectives: comm_id, seq, op... ; kernels: launch parameters; transfers: bytes).
enum class SliceDetail { kNone, kCollective, kKernel, kTransfer };

class ExportSliceCursor : public RowCursor {
 public:
  ExportSliceCursor(const SqliteDb& db, SqliteStatement stmt, SliceDetail detail)
      : RowCursor(db, std::move(stmt), "reading the slices from the trace"), detail_(detail) {}
  bool next(ExportSlice& slice);

 private:
  SliceDetail detail_;
};

// Transfer rows exist from schema version 3; an older trace has no kTransfer pass.
bool has_transfer_table(const TraceReader& reader);
StatusOr<ExportSliceCursor> export_slices(const TraceReader& reader,
                                          const ExportSelection& selection, SliceDetail detail);

// A memory sample with its category's name.
struct ExportMemorySample {
  int rank = 0;
  int64_t ts_ns = 0;
  std::string category;
  int64_t bytes = 0;
};
class ExportMemoryCursor : public RowCursor {
 public:
  using RowCursor::RowCursor;
  bool next(ExportMemorySample& sample);
};
// The memory categories' names, by code.
StatusOr<std::vector<std::string>> memory_category_names(const TraceReader& reader);
// The bytes of `category` in use on `rank` at ts_ns (its last sample at or before); nullopt
// before its first.
StatusOr<std::optional<int64_t>> memory_bytes_at(const TraceReader& reader, int rank,
                                                 std::string_view category, int64_t ts_ns);
// The selected ranks' samples inside the steps' window (after its start), in stored order.
StatusOr<ExportMemoryCursor> export_memory(const TraceReader& reader,
                                           const ExportSelection& selection);

// A sampled value of a counter track (NVML's, named with its unit).
struct ExportCounterSample {
  int rank = 0;
  int64_t ts_ns = 0;
  std::string name;
  double value = 0;
};
class ExportCounterCursor : public RowCursor {
 public:
  using RowCursor::RowCursor;
  bool next(ExportCounterSample& sample);
};
// Counter rows exist from schema version 2; an older trace has none.
bool has_counter_table(const TraceReader& reader);
// By rank, name and time.
StatusOr<ExportCounterCursor> export_counters(const TraceReader& reader,
                                              const ExportSelection& selection);

// One end of a flow arrow: a slice's place.
struct FlowSlice {
  int rank = 0;
  std::string track_kind;
  std::string track;
  int64_t ts_ns = 0;
  int64_t dur_ns = 0;
};

// send -> recv pairs: same communicator and seq (p2p seq counts per communicator and peer pair,
// so both sides agree), each naming the other as peer, both ends selected.
class SendRecvCursor : public RowCursor {
 public:
  using RowCursor::RowCursor;
  bool next(FlowSlice& send, FlowSlice& recv);
};
StatusOr<SendRecvCursor> export_send_recv_pairs(const TraceReader& reader,
                                                const ExportSelection& selection);

// The selected members of every collective (send/recv aside), by comm_id, seq, start, rank.
struct CollectiveMember {
  std::string comm_id;
  int64_t seq = 0;
  std::string op;
  FlowSlice slice;
};
class CollectiveMemberCursor : public RowCursor {
 public:
  using RowCursor::RowCursor;
  bool next(CollectiveMember& member);
};
StatusOr<CollectiveMemberCursor> export_collective_members(const TraceReader& reader,
                                                           const ExportSelection& selection);

}  // namespace partrain::profiler
