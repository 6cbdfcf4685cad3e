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

#include "profiler/gpu_activity_translator.h"
#include "profiler/inject/gpu_tracing.h"
#include "profiler/nccl_tracker.h"
#include "profiler/rank_tracer.h"

namespace partrain::profiler::inject {

class InjectedProcess {
 public:
  // The process's state, or nullptr while it is not (or no longer) traced. Lock-free: called on
  // every NCCL call.
  static InjectedProcess* current();
  // Makes this process a rank of the trace unless it is one already: as the launcher's rank
  // when one was published (RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID), else as
  // `nccl_rank` (the rank passed to its first ncclCommInitRank). nullptr when it cannot be:
  // no collector in the environment, no rank known, or a helper process of a rank.
  static InjectedProcess* start(std::optional<int> nccl_rank);
  // Ends tracing at exit: open NCCL groups recorded, the process slice written, the tracer
  // flushed and closed.
  static void stop();

  // CUDA was initialised in the process (CUPTI's injection entry point ran): GPU activity is
  // collected from then on by the rank this process is or becomes.
  static void cuda_initialised();

  RankTracer& tracer() { return *tracer_; }
  NcclTracker& nccl() { return nccl_; }
  // GPU activity collection, or nullptr (no CUDA yet, no CUPTI, CUPTI taken, CPU-only build).
  GpuTracing* gpu() const { return gpu_.load(std::memory_order_acquire); }
  // A fresh external correlation id (CUPTI's EXTERNAL_CORRELATION) for one NCCL call or group.
  uint64_t next_correlation_id() { return next_correlation_.fetch_add(1) + 1; }

 private:
  // The rank's tracer as the GPU translator's sink.
  class TracerSink final : public GpuTraceSink {
   public:
    explicit TracerSink(RankTracer& tracer) : tracer_(tracer) {}
    int32_t rank() const override { return tracer_.rank(); }
    int64_t timeline_ns(int64_t local_ns) const override { return tracer_.timeline_ns(local_ns); }
    int64_t step() const override { return tracer_.step(); }
    void emit(const TraceEvent& event) override { tracer_.emit(event); }
    void collective(const CollectiveEvent& event, int64_t gpu_start_ns,
                    int64_t gpu_end_ns) override {
      tracer_.collective(event, gpu_start_ns, gpu_end_ns);
    }

   private:
    RankTracer& tracer_;
  };

  InjectedProcess(std::unique_ptr<RankTracer> tracer, int world_size);

  void start_gpu_tracing();
  void record_call(const NcclCallRecord& record);
  void record_comm(const NcclCommEvent& event);

  std::unique_ptr<RankTracer> tracer_;
  TracerSink gpu_sink_;
  NcclTracker nccl_;
  std::unique_ptr<GpuTracing> gpu_owner_;
  std::atomic<GpuTracing*> gpu_{nullptr};
  const int64_t start_ns_;
  const int pid_;  // a fork()ed child inherits this object but none of the tracer's threads
  std::atomic<uint64_t> next_correlation_{0};
};

}  // namespace partrain::profiler::inject
