// A rank's side of tracing: turns what the rank does (slices, collectives, memory changes, steps)
// into TraceEvents on the run-wide timeline and hands them to its Recorder, which ships them to the
// node's collector. Never blocks training and never fails it: a lost collector means counted drops.
// The worker makes one (runner/worker/rank_tracing.h) and hands it to what records: the trainer,
// the model chunks and the optimizer open TraceScopes on it (nullptr: the rank is not traced).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "profiler/clock_sync.h"
#include "profiler/collector.h"
#include "profiler/recorder.h"
#include "profiler/trace_event.h"

namespace partrain::profiler {

// The environment a traced process finds: the node collector's socket and the token its frames
// carry. PARTRAIN_COLLECTOR_TOKEN falls back to PARTRAIN_TOKEN (a launcher's run token).
inline constexpr std::string_view kCollectorEnv = "PARTRAIN_COLLECTOR";
inline constexpr std::string_view kCollectorTokenEnv = "PARTRAIN_COLLECTOR_TOKEN";

// TORCHELASTIC_RESTART_COUNT, the times torchrun (--max-restarts) restarted the job before this
// worker's attempt; 0 when unset or not a count. partrain's own launcher never restarts (0).
int restart_attempt_from_env();

struct RankTracerOptions {
  std::string socket_path;
  std::string token;
  int32_t rank = 0;
  int32_t attempt = restart_attempt_from_env();  // stored with each step (`step.attempt`)
  RecorderOptions recorder;
  std::chrono::milliseconds connect_timeout{2000};
};

class RankTracer {
 public:
  // The tracer the environment asks for, or nullptr when this process is not traced.
  static std::unique_ptr<RankTracer> from_env(int32_t rank);

  explicit RankTracer(RankTracerOptions options);
  // Ships what is still buffered (bounded by the recorder's flush timeout).
  ~RankTracer();
  RankTracer(const RankTracer&) = delete;
  RankTracer& operator=(const RankTracer&) = delete;

  int32_t rank() const { return rank_; }

  // The clock model: local monotonic ns + offset_at(local) = run-wide timeline. Until the first
  // measurement the offset is 0 (right on node 0, where the timeline's clock lives).
  void set_clock(const ClockDrift& drift);
  int64_t timeline_ns(int64_t local_ns) const;

  // The training step the rank is in from now on; slices are tagged with it (-1: none).
  void set_step(int64_t step);
  int64_t step() const { return step_.load(std::memory_order_relaxed); }
  // The step the rank was in at local_ns (the latest set_step at or before it; -1 before any, or
  // before the oldest of the last kStepHistory): for what is recorded after the fact (a GPU
  // kernel's record, an NCCL call written once its kernels are known).
  int64_t step_at(int64_t local_ns) const;
  static constexpr size_t kStepHistory = 4096;

  // Times below are local monotonic ns (core/clock.h); the tracer moves them onto the timeline.
  // The track is the calling thread's: "main" for the thread that made the tracer.
  // `step`: the step the slice belongs to when not the rank's current one (-1: none).
  void slice(std::string_view name, SliceCategory category, int64_t start_ns, int64_t end_ns,
             int layer = -1, int micro_batch = -1, std::optional<int64_t> step = std::nullopt);
  // A slice on the "main" track whichever thread records it: a traced process's lifetime,
  // recorded at its exit from a helper thread.
  void main_track_slice(std::string_view name, SliceCategory category, int64_t start_ns,
                        int64_t end_ns);
  // The event's peer/root (a communicator rank) is stored as the world rank it is. GPU times
  // (local ns, -1: not measured) are when the op's kernels ran, for busbw on GPU time.
  void collective(const CollectiveEvent& event, int64_t gpu_start_ns = -1,
                  int64_t gpu_end_ns = -1);
  void memory(uint8_t category, int64_t local_ns, int64_t bytes_in_use);
  void step_done(int64_t step, int64_t start_ns, int64_t end_ns, double loss, int64_t tokens);
  // How a mixture-of-experts layer routed the tokens of `step` (ExpertLoadRecord in
  // trace_event.h says what each count is): once per step and MoE layer, from any rank that holds
  // the layer; the counts are the whole micro-batch's, the same on every rank of its group, and
  // `analyze` reads the lowest rank's. aux_loss NaN: the layer computes none. Experts past
  // kMaxExperts are not recorded.
  void expert_load(int64_t step, int layer, std::span<const int64_t> tokens_per_expert,
                   int64_t dropped_tokens, double aux_loss);
  // Called on step_done's thread after each step is recorded: a GPU activity collection flushes
  // there, so the step's kernels reach the trace promptly. Set before the first step.
  void set_step_listener(std::function<void()> listener) { step_listener_ = std::move(listener); }
  // An event already on the timeline (rank metadata, stats).
  void emit(const TraceEvent& event);

  bool flush(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  RecorderStats recorder_stats() const { return recorder_->stats(); }
  CollectorClientStats client_stats() const { return client_->stats(); }

 private:
  const std::string& thread_track() const;
  void slice_on(const std::string& track, std::string_view name, SliceCategory category,
                int64_t start_ns, int64_t end_ns, int layer, int micro_batch,
                std::optional<int64_t> step);

  const int32_t rank_;
  const int32_t attempt_;
  const std::thread::id main_thread_;
  std::unique_ptr<CollectorClient> client_;
  std::unique_ptr<Recorder> recorder_;
  // The clock model, read for every event without a lock: a sequence number that is odd while
  // set_clock writes, around the fit's parameters (a seqlock; set_clock runs every few seconds).
  std::mutex clock_write_mutex_;
  std::atomic<uint64_t> clock_version_{0};
  std::atomic<int64_t> clock_reference_ns_{0};
  std::atomic<double> clock_offset_ns_{0};
  std::atomic<double> clock_drift_ppm_{0};
  std::atomic<int64_t> step_{-1};
  mutable std::mutex step_history_mutex_;
  std::deque<std::pair<int64_t, int64_t>> step_history_;  // (local ns, step), oldest first
  std::function<void()> step_listener_;
};

}  // namespace partrain::profiler
