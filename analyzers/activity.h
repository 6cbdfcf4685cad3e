// What a slice's time counts as wherever partrain splits a rank's time (docs/analysis.md):
// `partrain analyze`'s breakdown, the dashboard's last-step split and its timeline all take the
// kind of a slice from here.
#pragma once

#include <cstdint>

#include "profiler/trace_event.h"
#include "profiler/trace_reader/slice_reads.h"

namespace partrain::analyzers {

enum class Activity : uint8_t {
  kCompute,  // compute and kernel slices
  kComm,     // collective and p2p slices
  kMemcpy,   // memcpy and memset slices
  kSync,     // synchronisation: neither busy time nor a container
  kPhase,    // forward, backward, optimizer...: contains the others, and waits between them
  kStep,     // a whole step: contains everything
};

Activity activity_of(profiler::SliceCategory category);
// The categories whose time the breakdown counts (compute, comm, memcpy and phases).
profiler::SliceCategorySet breakdown_categories();

}  // namespace partrain::analyzers
