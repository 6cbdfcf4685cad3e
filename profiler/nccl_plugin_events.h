// What NCCL's profiler plugin tells about one communicator's operations, assembled into one
// NcclPluginOp per collective or p2p task: NCCL's algorithm, protocol and channel count from the
// task's start, and its GPU span from its kernel channels' %globaltimer stamps (the earliest
// channel start to the latest channel end; v4 and later report them). Proxy operations are only
// counted. Version-neutral: profiler/inject/nccl_profiler_plugin.cpp translates each plugin ABI
// version's calls into these; tests drive them directly. Thread-safe: NCCL starts tasks on the
// calling thread and reports kernel channels from its proxy thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace partrain::profiler {

struct NcclPluginOp {
  uint64_t comm_hash = 0;  // NCCL's hash of the communicator the plugin context was made for
  std::string_view op;     // the trace's op name (all_reduce, send, ...) of NCCL's function
  uint64_t nccl_seq = 0;   // NCCL's number per (communicator, function); 0 for p2p
  uint64_t count = 0;
  int peer = -1;              // p2p peer (communicator rank)
  std::string algorithm;      // "Ring", "Tree", "NVLS"...; empty for p2p
  std::string protocol;       // "LL", "LL128", "Simple"; empty for p2p
  int channels = 0;           // channels NCCL gave it
  int channels_timed = 0;     // channels that reported a start and an end
  int64_t gpu_start_ns = -1;  // GPU timer (ns); -1: no channel reported
  int64_t gpu_end_ns = -1;
};

// The trace's op name for NCCL's function name ("AllReduce" -> "all_reduce"); "other" when
// unknown.
std::string_view nccl_function_op_name(std::string_view function);

// Per communicator: what the proxy threads moved, summarised (never one row per step).
struct NcclProxySummary {
  uint64_t ops = 0;
  uint64_t send_bytes = 0;
  uint64_t recv_bytes = 0;
};

class NcclPluginEvents {
 public:
  using OpSink = std::function<void(const NcclPluginOp&)>;

  // One plugin context: a communicator as NCCL's init described it.
  class Context {
   public:
    Context(NcclPluginEvents& events, uint64_t comm_hash, int nranks, int rank)
        : events_(events), comm_hash_(comm_hash), nranks_(nranks), rank_(rank) {}
    uint64_t comm_hash() const { return comm_hash_; }
    int nranks() const { return nranks_; }
    int rank() const { return rank_; }
    NcclPluginEvents& events() const { return events_; }
    NcclProxySummary proxy_summary() const;
    void proxy_op(bool is_send, int steps, int chunk_bytes);

   private:
    NcclPluginEvents& events_;
    const uint64_t comm_hash_;
    const int nranks_;
    const int rank_;
    std::atomic<uint64_t> proxy_ops_{0};
    std::atomic<uint64_t> send_bytes_{0};
    std::atomic<uint64_t> recv_bytes_{0};
  };

  explicit NcclPluginEvents(OpSink on_op) : on_op_(std::move(on_op)) {}

  // A context for one communicator NCCL initialised; it lives as long as this object (NCCL's
  // finalize only forgets it), so the proxy summary covers communicators never destroyed.
  Context& create_context(uint64_t comm_hash, int nranks, int rank);
  // Over every context.
  NcclProxySummary proxy_summary() const;

  // The handles NCCL keeps and hands back; nullptr for events partrain does not follow.
  void* collective_started(Context& context, std::string_view function, uint64_t nccl_seq,
                           uint64_t count, std::string_view algorithm, std::string_view protocol,
                           int channels);
  void* p2p_started(Context& context, std::string_view function, uint64_t count, int peer,
                    int channels);
  // A kernel channel of the task `parent` (a handle from above) began at GPU time `gpu_ns`.
  void* kernel_channel_started(void* parent, int channel, uint64_t gpu_ns);
  // recordEventState(KernelChStop): the channel's end.
  void kernel_channel_ended(void* handle, uint64_t gpu_ns);
  // stopEvent of any handle above: a task's host side is done (its kernel channels may come
  // later), a kernel channel's event is over. A task lives until its host side and every channel
  // NCCL gave it are done.
  void stopped(void* handle);

  // The process ends: tasks whose channels have not all reported are reported as they are
  // (their handles stay valid: NCCL may still end them).
  void flush();

  // Tasks started and not yet complete (a kernel channel never reported).
  uint64_t open_tasks() const { return open_tasks_.load(std::memory_order_relaxed); }

 private:
  struct Task;
  struct KernelChannel;
  Task* task_started(Context& context, std::string_view function, uint64_t count, int channels);
  // One task's reference gone; it is reported when complete and freed with its last reference.
  void release(Task* task);
  void finish_if_complete(Task* task, std::unique_lock<std::mutex>& lock);

  // Whether `handle` is a task this object started and has not freed: NCCL hands a kernel
  // channel its task's handle, which is only dereferenced once known to be one.
  bool live_task(void* handle) const;

  const OpSink on_op_;
  std::atomic<uint64_t> open_tasks_{0};
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Context>> contexts_;
  std::unordered_set<void*> live_tasks_;
};

}  // namespace partrain::profiler
