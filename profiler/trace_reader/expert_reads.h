// Reading the mixture-of-experts records: which layers a trace's ranks recorded routing for, and
// one layer's steps as one rank recorded them (the expert_load table, trace schema 5; an older
// trace has none).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/status.h"
#include "profiler/trace_reader/row_cursor.h"
#include "profiler/trace_reader/step_reads.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::profiler {

// One layer's routing in one step (ExpertLoadRecord, trace_event.h).
struct ExpertLoadRow {
  int rank = 0;
  int64_t step = 0;
  int layer = 0;
  std::vector<int64_t> tokens_per_expert;  // indexed by expert
  int64_t dropped_tokens = 0;
  std::optional<double> aux_loss;
};

// A layer with records in the steps asked for: the lowest rank that recorded it (its counts are
// the whole micro-batch's, the same on every rank of the layer's group) and how many ranks did.
struct ExpertLayerSource {
  int layer = 0;
  int rank = 0;
  int ranks = 0;
};

class ExpertLoadCursor : public RowCursor {
 public:
  using RowCursor::RowCursor;
  // False at the end, or on a tokens array that does not parse (status() names the row).
  bool next(ExpertLoadRow& row);
};

// The layers recorded in `steps`, by layer; none for a trace older than schema 5.
StatusOr<std::vector<ExpertLayerSource>> expert_layer_sources(const TraceReader& reader,
                                                              const StepFilter& steps);
// `layer`'s steps as `rank` recorded them, by step (the table's (rank, step, layer) key).
StatusOr<ExpertLoadCursor> expert_loads(const TraceReader& reader, int rank, int layer,
                                        const StepFilter& steps);

}  // namespace partrain::profiler
