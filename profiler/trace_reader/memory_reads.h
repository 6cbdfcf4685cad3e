// Reading the memory samples: one rank's in time order, or those stored after a given rowid
// (what a live reader has not seen).
#pragma once

#include <cstdint>

#include "core/status.h"
#include "profiler/trace_reader/row_cursor.h"
#include "profiler/trace_reader/trace_codes.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::profiler {

// Bytes in use in one category from ts_ns on.
struct MemoryRow {
  int64_t rowid = 0;
  int rank = 0;
  int64_t ts_ns = 0;
  uint8_t category = 0;  // memory::Category's value (trace_codes.h)
  int64_t bytes = 0;
};

class MemoryCursor : public RowCursor {
 public:
  using RowCursor::RowCursor;
  bool next(MemoryRow& row);
};

// What a replay of one rank's samples needs, and no more: each column read costs (the memory
// pass reads every sample of the run).
struct MemoryLevel {
  uint8_t category = 0;  // memory::Category's value (trace_codes.h)
  int64_t bytes = 0;
};

class RankMemoryCursor : public RowCursor {
 public:
  using RowCursor::RowCursor;
  bool next(MemoryLevel& level) {
    if (!step()) return false;
    level.category = memory_category_from_code(stmt_.column_int(0));
    level.bytes = stmt_.column_int(1);
    return true;
  }
};

// One rank's samples in time order (the covering memory_rank_ts index once the trace is closed).
StatusOr<RankMemoryCursor> rank_memory(const TraceReader& reader, int rank);
// Samples with rowid in (after, upto], in the order they were stored.
StatusOr<MemoryCursor> memory_stored_between(const TraceReader& reader, int64_t after,
                                             int64_t upto);
// The rowid of the latest sample (0 for none).
StatusOr<int64_t> last_memory_rowid(const TraceReader& reader);

}  // namespace partrain::profiler
