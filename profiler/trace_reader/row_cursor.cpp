#include "profiler/trace_reader/row_cursor.h"

#include "profiler/trace_open.h"

namespace partrain::profiler {

void RowCursor::note_error() { status_ = trace_read_error(*db_, what_); }

}  // namespace partrain::profiler
