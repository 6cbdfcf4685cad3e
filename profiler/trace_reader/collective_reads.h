// Reading the collectives: the communicators and one communicator's ops in sequence order (the
// matching of (comm_id, seq) across ranks streams these). A row is the op of one rank, its
// strings resolved.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "profiler/collective_event.h"
#include "profiler/trace_reader/row_cursor.h"
#include "profiler/trace_reader/step_reads.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::profiler {

struct Communicator {
  int64_t string_id = 0;  // the interned comm_id
  std::string comm_id;
};

// One rank's record of a collective or p2p op (the collectives view's columns). Texts are
// valid while the reader lives.
struct CollectiveOp {
  int rank = 0;
  std::string_view comm_id;
  int64_t seq = 0;
  std::string_view op;
  std::string_view dtype;  // "other" where its source did not know it
  int64_t bytes = 0;
  std::optional<int> peer;  // send/recv peer or root, as a world rank
  int64_t ts_ns = 0;        // host start and duration (its slice)
  int64_t dur_ns = 0;
  std::optional<int64_t> gpu_start_ns;
  std::optional<int64_t> gpu_end_ns;
  int group_size = 0;            // 0: not recorded
  std::string_view group_ranks;  // "0,1,2,3" when recorded
  std::optional<CollectiveState> state;
  std::string_view label;  // what the caller said the op is for (moe_dispatch); empty: none
  std::optional<int64_t> step;  // the step the rank was in, when it marks steps
};

// One communicator's ops by seq (its collective_comm_seq index): every member rank's record of
// seq 1, then of seq 2... Ops whose slice has no track row are left out, as the views leave them.
class CommunicatorOpCursor : public RowCursor {
 public:
  CommunicatorOpCursor(const TraceReader& reader, SqliteStatement stmt, std::string what,
                       std::string_view comm_id)
      : RowCursor(reader.db(), std::move(stmt), std::move(what)),
        reader_(&reader),
        comm_id_(comm_id) {}
  bool next(CollectiveOp& op);

 private:
  const TraceReader* reader_;
  std::string_view comm_id_;
};

// Communicators that name at least one op, by comm_id.
StatusOr<std::vector<Communicator>> communicators(const TraceReader& reader);
// `comm` must outlive the cursor.
StatusOr<CommunicatorOpCursor> communicator_ops(const TraceReader& reader,
                                                const Communicator& comm);
StatusOr<bool> has_collectives(const TraceReader& reader);
// The ops their ranks did not complete (failed, or left enqueued or started when the rank dumped
// or ended): what each rank was waiting in when a run failed. By rank, then start. A trace holds
// a few of them, but finding them scans the collectives.
StatusOr<std::vector<CollectiveOp>> unfinished_collectives(const TraceReader& reader);
// When `rank`'s last recorded collective ended; nullopt: it recorded none.
StatusOr<std::optional<int64_t>> last_collective_end_ns(const TraceReader& reader, int rank);
// The ranks that recorded op `seq` of communicator `comm_id`, lowest first.
StatusOr<std::vector<int>> ranks_that_recorded(const TraceReader& reader, std::string_view comm_id,
                                               int64_t seq);

}  // namespace partrain::profiler
