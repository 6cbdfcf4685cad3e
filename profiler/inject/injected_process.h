// The tracing state of one process libpartrain_inject.so was loaded into: its rank's tracer and
// the NCCL bookkeeping, made when the process turns out to be a rank (a launcher published its
// rank, or it initialised an NCCL communicator) and ended at exit(). An injection library has no
// main() to hand a context down, so this one object is reached through current(); nothing else
// in the library holds state.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>

#include "core/status.h"
#include "profiler/gpu_activity_translator.h"
#include "profiler/gpu_counter_sampler.h"
#include "profiler/gpu_tracing.h"
#include "profiler/inject/rank_flight.h"
#include "profiler/inject/torch_recording.h"
#include "profiler/nccl_plugin_events.h"
#include "profiler/nccl_plugin_join.h"
#include "profiler/nccl_tracker.h"
#include "profiler/rank_tracer.h"
#include "profiler/rank_tracer_gpu_sink.h"
#include "profiler/step_marker.h"

namespace partrain::profiler::inject {

class InjectedProcess {
 public:
  // The process's state, or nullptr while it is not (or no longer) traced. Lock-free: called on
  // every NCCL call.
  static InjectedProcess* current();
  // The library was loaded into a new program image (or an exec failed): the process becomes
  // a rank of the trace when a launcher published its rank (RANK, OMPI_COMM_WORLD_RANK,
  // PMI_RANK, SLURM_PROCID), unless it is one of a rank's processes (its parent has the same
  // rank): a shell wrapper's python, a rank's helpers. nullptr when it is not a rank (yet).
  static InjectedProcess* start_at_load();
  // The process acts as a rank: it initialises an NCCL communicator or registers a c10d process
  // group. It becomes the launcher's rank when one was published, else `rank` (the one passed
  // to NCCL or given by c10d); a process its parent's rank passed over at load takes that rank
  // over from the parent (`bash run.sh` -> python: the shell does nothing a rank does). nullptr
  // when it cannot be: no collector in the environment, no rank known, partrain's own worker.
  // A launcher rank the process inherited from the process that started it gives way to a
  // `rank` that is a world rank (c10d's) and differs: the processes torch.multiprocessing.spawn
  // starts under an sbatch script all inherit its SLURM_PROCID. A communicator's rank (NCCL's,
  // of a group that may not be the world) never overrides a launcher's.
  enum class RankSource { kCommunicator, kWorld };
  static InjectedProcess* start_as_rank(std::optional<int> rank, RankSource source);
  // Ends tracing at exit (and before an exec): open NCCL groups recorded, the process slice
  // written, the tracer flushed and closed. False when this process was not tracing (none
  // started, or a vfork()ed child, which leaves its parent's alone).
  static bool stop();
  // Whether this process is the one tracing (not a vfork()ed or fork()ed child of it).
  // Async-signal-safe: an atomic load and getpid.
  static bool tracing_in_this_process();

  // CUDA was initialised in the process (CUPTI's injection entry point ran): GPU activity is
  // collected from then on by the rank this process is or becomes.
  static void cuda_initialised();

  RankTracer& tracer() { return *tracer_; }
  NcclTracker& nccl() { return nccl_; }
  TorchRecording& torch() { return torch_; }
  // NCCL's profiler plugin (profiler/inject/nccl_profiler_plugin.cpp) reports here.
  NcclPluginEvents& nccl_plugin() { return nccl_plugin_; }
  NcclPluginJoin& plugin_join() { return plugin_join_; }
  // A communicator was initialised without NCCL initialising partrain's profiler plugin while
  // the tracing level asked for it: said once (collectives keep the interposition's host times).
  void plugin_not_offered(int nccl_version);
  // GPU activity collection, or nullptr (no CUDA yet, no CUPTI, CUPTI taken, CPU-only build).
  GpuTracing* gpu() const { return gpu_.load(std::memory_order_acquire); }
  // An NVTX range began: the step it starts when the step marker matches its name (the rank is
  // in that step from now on), else nullopt.
  std::optional<int64_t> step_started(std::string_view range_name);
  // The step the rank is in (-1: none yet), for a range to remember where it began.
  int64_t current_step() const { return tracer_->step(); }
  // An NVTX range ended: a slice on the calling thread's track in the step it began in, and for
  // a step marker the rank's step (a `step` slice and its steps row).
  void range_ended(std::string_view name, int64_t start_ns, int64_t end_ns,
                   std::optional<int64_t> marked_step, int64_t step_at_start);
  // A training step ended (an NVTX step marker, or a PyTorch module's marker): its `step` slice
  // and steps row, and the GPU activity collected so far flushed.
  void step_ended(int64_t step, int64_t start_ns, int64_t end_ns);
  // Whether an NVTX range has matched the step marker: the program marks its steps itself
  // (--step-marker), and partrain's Python module's steps (ProfilerStep#N, the optimizer) give
  // way from then on, so one step is never written twice.
  bool nvtx_marks_steps() const { return nvtx_marks_steps_.load(std::memory_order_relaxed); }
  // A PyTorch collective of this rank failed (its Work's error, or its call raised): the flight
  // recorder is dumped, when dumps are asked for (rank_flight.h).
  void collective_failed(const CollectiveEvent& event) {
    if (flight_ != nullptr) flight_->on_collective_failed(event);
  }
  // The program has ended (its Python atexit handlers ran): a signal's dump says it came after.
  void program_ended() {
    if (flight_ != nullptr) flight_->program_ended();
  }
  // Whether CUPTI links the kernels of an NCCL call on a communicator of `comm_nranks` ranks to
  // the call (a correlation pushed around it; the row waits for its kernels): wherever NCCL's
  // profiler plugin gives the call no GPU span. That is everywhere without the plugin, and with
  // it on a communicator of one rank (or of unknown size, 0), of which NCCL reports no task to
  // the plugin although it may run a kernel (an AVG all_reduce scales in place).
  bool cupti_links_calls(int comm_nranks) const;
  // A fresh external correlation id (CUPTI's EXTERNAL_CORRELATION) for one NCCL call or group.
  uint64_t next_correlation_id() { return next_correlation_.fetch_add(1) + 1; }

 private:
  InjectedProcess(std::unique_ptr<RankTracer> tracer, int world_size);
  // Makes this process `rank` of the trace (under the start lock); nullptr without a rank, a
  // collector, or in partrain's own worker.
  static InjectedProcess* begin(std::optional<int> rank);

  void start_gpu_tracing();
  void start_gpu_counters();
  void record_call(const NcclCallRecord& record);
  // A row for the trace: with GPU times when GPU activity is collected.
  void deliver_call(const NcclCallRecord& record);
  void record_comm(const NcclCommEvent& event);
  // A row joined (or not) to the plugin's report of it.
  void deliver_joined(const NcclCallRecord& record, const NcclPluginOp* report);
  void record_plugin_stats();

  std::unique_ptr<RankTracer> tracer_;
  RankTracerGpuSink gpu_sink_;
  NcclTracker nccl_;
  TorchRecording torch_;
  NcclPluginEvents nccl_plugin_;
  NcclPluginJoin plugin_join_;
  // CLOCK_REALTIME minus CLOCK_MONOTONIC at the start: NCCL's kernel channel timers read the
  // GPU's %globaltimer, which the driver keeps in Unix time.
  const int64_t realtime_offset_ns_;
  std::atomic<uint64_t> gpu_clock_unaligned_{0};
  std::atomic<bool> plugin_absence_said_{false};
  std::unique_ptr<GpuTracing> gpu_owner_;
  std::atomic<GpuTracing*> gpu_{nullptr};
  std::unique_ptr<GpuCounterSampler> gpu_counters_;  // NVML, where a driver is
  RankFlight* flight_ = nullptr;  // the watchdog and stop-signal dumps, when asked for; never freed
  const int64_t start_ns_;
  const int pid_;  // a fork()ed child inherits this object but none of the tracer's threads
  std::atomic<uint64_t> next_correlation_{0};
  std::mutex step_marker_mutex_;
  std::optional<StepMarker> step_marker_;
  std::atomic<bool> nvtx_marks_steps_{false};
};

// The thread that ends the tracing when the process calls _exit or _Exit (exit_interpose.cpp):
// started with the tracing, once per process image. Unavailable when the host refuses the thread
// or its eventfds: a process that then ends with _exit loses what it had not shipped.
Status start_exit_flusher();

}  // namespace partrain::profiler::inject
