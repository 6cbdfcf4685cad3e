// The first pass over one rank's Kineto file: each event becomes a partrain event in the spool
// (on the file's clock, its thread named later, its step not yet known), and what the second
// pass needs is kept aside, small: the steps, thread names, the evidence of collectives, which
// devices the rank used. Memory holds that summary, never the events.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "profiler/import/event_spool.h"
#include "profiler/import/imported_run.h"
#include "profiler/import/kineto_collectives.h"
#include "profiler/import/kineto_json.h"
#include "profiler/step_marker.h"

namespace partrain::profiler {

// How a memory sample's device travels through the spool: MemorySample::rank holds this code
// until the second pass knows which device's memory the rank reports.
inline constexpr int32_t kSpooledCpuMemory = 0;
inline int32_t spooled_cuda_memory(int device) { return device + 1; }

struct KinetoRankScan {
  std::vector<StepSpan> steps;
  std::map<std::string, std::string> thread_names;  // "pid/tid" -> Kineto's thread name
  RankCollectiveEvidence collectives;
  std::map<int, int64_t> kernels_per_device;
  std::map<int, int64_t> memory_events_per_cuda_device;
  int64_t cpu_memory_events = 0;  // Device Type 0: the CPU allocator's, counted from profiling on
  // Whether the rank's memory is the CPU allocator's: no CUDA samples of its main device.
  bool memory_on_cpu() const {
    const int device = main_device();
    return device < 0 || !memory_events_per_cuda_device.contains(device);
  }
  // The rank has two or more steps and host events, and none of those (an op, annotation,
  // runtime call) starts inside its last step: the profiler stopped as that step began. Kernels
  // are not counted: the GPU runs the earlier steps' work into it.
  bool last_step_empty = false;
  int64_t main_pid = -1;  // the process whose thread marks the steps (else the first CPU op's)
  int64_t first_ns = INT64_MAX;
  int64_t last_ns = INT64_MIN;
  int64_t events = 0;   // read from traceEvents
  int64_t spooled = 0;  // became partrain events
  int64_t skipped = 0;  // events without a time, or of a kind partrain has no place for
  // Device activity of an accelerator partrain does not import (MTIA's mtia_ccp_events: DMA
  // requests, waits on its streams), by category: left out, and counted into `skipped` too.
  std::map<std::string, int64_t> foreign_device_events;
  int64_t negative_durations = 0;  // events whose dur was below 0, kept 0 long
  int64_t unreadable_times = 0;    // events whose ts or dur did not read (KinetoEvent)
  std::string exporter;            // the file's otherData.exporter, where its writer names itself
  // Kineto's own metadata was there (schemaVersion, distributedInfo or baseTimeNanoseconds).
  bool kineto_metadata = false;

  bool has_kernels() const { return !kernels_per_device.empty(); }
  // The device whose kernels (else memory events) are most numerous; -1 for a CPU rank.
  int main_device() const;
};

// Reads `text` (a Kineto file already checked by its header) into `spool` and the returned
// summary, every time moved by `shift_ns` (this file's baseTimeNanoseconds minus the reference
// file's). Fails with kUnreadable as read_kineto_trace does, or when the spool cannot be written.
StatusOr<KinetoRankScan> scan_kineto_rank(GzipText& text, int64_t shift_ns, StepMarker& steps,
                                          EventSpool& spool);

}  // namespace partrain::profiler
