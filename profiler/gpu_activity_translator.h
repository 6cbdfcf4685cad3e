// Turns GPU activity records into trace events for one rank: kernels onto their stream's track
// with their launch parameters (names demangled), copies and sets, the host's waits, device
// memory reserved, and the GPU start/end of each NCCL call, found through the external
// correlation id pushed around it. CUPTI hands records over in buffers, in no promised order,
// after the call that caused them: NCCL calls wait here until their kernels are seen (or the
// last flush), so busbw can be computed on GPU time. Not thread-safe: its owner serialises calls.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>

#include "profiler/gpu_activity.h"
#include "profiler/nccl_tracker.h"
#include "profiler/trace_event.h"

namespace partrain::profiler {

// Where the translated events go: the rank's tracer in the injection library, a fake in tests.
class GpuTraceSink {
 public:
  virtual ~GpuTraceSink() = default;
  virtual int32_t rank() const = 0;
  virtual int64_t timeline_ns(int64_t local_ns) const = 0;
  // The step the rank was in at local_ns (-1: none): GPU records arrive late, and belong to the
  // step in which their work began.
  virtual int64_t step_at(int64_t local_ns) const = 0;
  virtual void emit(const TraceEvent& event) = 0;
  // An NCCL call with its kernels' span (local ns; -1 when none was seen).
  virtual void collective(const CollectiveEvent& event, int64_t gpu_start_ns,
                          int64_t gpu_end_ns) = 0;
};

class GpuActivityTranslator {
 public:
  // Bounds on what waits for its other half; beyond them the oldest goes without (counted).
  static constexpr size_t kMaxPendingCalls = 1 << 16;
  static constexpr size_t kMaxUnmatchedCorrelations = 1 << 18;
  // A call still without kernels once the GPU has begun work this long after the call returned
  // launched none (a one-rank SUM all_reduce: NCCL adds nothing) or lost them: it goes without,
  // rather than wait for the process's end. A kernel launched inside the call would have had to
  // sit queued behind seconds of its stream's work while other work started.
  static constexpr int64_t kKernelWaitNs = 5'000'000'000;

  explicit GpuActivityTranslator(GpuTraceSink& sink);

  void add(const GpuActivity& activity);
  // An NCCL call (or group member) made on the host; recorded once its kernels are known.
  void add_nccl_call(const NcclCallRecord& call);
  // Records every NCCL call whose kernels have been seen, and those past kKernelWaitNs without;
  // with `final`, the rest too, without GPU times (a program that exits with work in flight,
  // kernel records lost).
  void flush(bool final);

  uint64_t calls_without_gpu_time() const { return calls_without_gpu_time_; }

 private:
  struct GpuSpan {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
  };

  void on(const GpuKernel& kernel);
  void on(const GpuMemcpy& copy);
  void on(const GpuMemset& set);
  void on(const GpuMemoryChange& change);
  void on(const GpuSynchronization& sync);
  void on(const GpuExternalCorrelation& link);
  void extend_span(uint64_t external_id, int64_t start_ns, int64_t end_ns);
  // A slice of this rank on the timeline, in the step the rank is in now.
  SliceEvent slice_on(TrackKind kind, std::string track, std::string_view name,
                      SliceCategory category, int64_t start_ns, int64_t end_ns) const;
  static std::string stream_track(int32_t device, uint32_t stream);  // "gpu0 stream 7"
  const std::string& demangled(const std::string& name);

  GpuTraceSink& sink_;
  std::unordered_map<uint32_t, uint64_t> external_of_;  // CUPTI correlation -> external id
  std::unordered_map<uint32_t, GpuSpan> unlinked_;      // kernels seen before their link
  std::unordered_map<uint64_t, GpuSpan> spans_;         // external id -> its kernels' span
  std::deque<NcclCallRecord> pending_;
  std::unordered_map<std::string, std::string> names_;  // mangled -> demangled
  int64_t reserved_bytes_ = 0;
  int64_t latest_kernel_start_ns_ = 0;  // local ns: how far the GPU's work has been seen
  uint64_t calls_without_gpu_time_ = 0;
};

}  // namespace partrain::profiler
