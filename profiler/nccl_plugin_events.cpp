#include "profiler/nccl_plugin_events.h"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

namespace partrain::profiler {

std::string_view nccl_function_op_name(std::string_view function) {
  // NCCL's ncclFuncToString names (src/collectives.cc); Send and Recv are its p2p tasks'.
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 11> kNames{{
      {"AllReduce", "all_reduce"},
      {"AllGather", "all_gather"},
      {"ReduceScatter", "reduce_scatter"},
      {"Broadcast", "broadcast"},
      {"Reduce", "reduce"},
      {"AlltoAll", "all_to_all"},
      {"Gather", "gather"},
      {"Scatter", "scatter"},
      {"Send", "send"},
      {"Recv", "recv"},
      {"SendRecv", "send_recv"},
  }};
  for (const auto& [nccl, ours] : kNames) {
    if (nccl == function) return ours;
  }
  return "other";
}

void NcclPluginEvents::Context::proxy_op(bool is_send, int steps, int chunk_bytes) {
  proxy_ops_.fetch_add(1, std::memory_order_relaxed);
  // At most this much: the last step of an operation may be shorter than a chunk.
  const uint64_t bytes =
      steps > 0 && chunk_bytes > 0 ? static_cast<uint64_t>(steps) * chunk_bytes : 0;
  (is_send ? send_bytes_ : recv_bytes_).fetch_add(bytes, std::memory_order_relaxed);
}

NcclProxySummary NcclPluginEvents::Context::proxy_summary() const {
  return {proxy_ops_.load(std::memory_order_relaxed), send_bytes_.load(std::memory_order_relaxed),
          recv_bytes_.load(std::memory_order_relaxed)};
}

NcclPluginEvents::Context& NcclPluginEvents::create_context(uint64_t comm_hash, int nranks,
                                                            int rank) {
  std::lock_guard lock(mutex_);
  contexts_.push_back(std::make_unique<Context>(*this, comm_hash, nranks, rank));
  return *contexts_.back();
}

NcclProxySummary NcclPluginEvents::proxy_summary() const {
  std::lock_guard lock(mutex_);
  NcclProxySummary all;
  for (const auto& context : contexts_) {
    const NcclProxySummary one = context->proxy_summary();
    all.ops += one.ops;
    all.send_bytes += one.send_bytes;
    all.recv_bytes += one.recv_bytes;
  }
  return all;
}

bool NcclPluginEvents::live_task(void* handle) const {
  std::lock_guard lock(mutex_);
  return live_tasks_.contains(handle);
}

namespace {
// Every handle begins with its kind, so stopped() can tell a task from a channel.
enum class HandleKind : uint8_t { kTask, kKernelChannel };
}  // namespace

struct NcclPluginEvents::Task {
  const HandleKind kind = HandleKind::kTask;
  std::mutex mutex;
  NcclPluginOp op;
  // The host's, and one per channel NCCL gave it: NCCL stops a task on the host before its
  // kernel channels start, and hands the task's handle to each channel afterwards.
  int references = 1;
  int channels_started = 0;
  int channels_ended = 0;
  bool host_done = false;
  bool reported = false;
};

struct NcclPluginEvents::KernelChannel {
  const HandleKind kind = HandleKind::kKernelChannel;
  Task* task = nullptr;
  uint64_t start_ns = 0;
  bool ended = false;
};

NcclPluginEvents::Task* NcclPluginEvents::task_started(Context& context, std::string_view function,
                                                       uint64_t count, int channels) {
  auto* task = new Task;
  task->op.comm_hash = context.comm_hash();
  task->op.op = nccl_function_op_name(function);
  task->op.count = count;
  task->op.channels = channels;
  task->references = 1 + std::max(channels, 0);
  open_tasks_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  live_tasks_.insert(task);
  return task;
}

void* NcclPluginEvents::collective_started(Context& context, std::string_view function,
                                           uint64_t nccl_seq, uint64_t count,
                                           std::string_view algorithm, std::string_view protocol,
                                           int channels) {
  Task* task = task_started(context, function, count, channels);
  // Not yet visible to another thread: NCCL hands the handle on only once this returns.
  task->op.nccl_seq = nccl_seq;
  task->op.algorithm = algorithm;
  task->op.protocol = protocol;
  return task;
}

void* NcclPluginEvents::p2p_started(Context& context, std::string_view function, uint64_t count,
                                    int peer, int channels) {
  Task* task = task_started(context, function, count, channels);
  task->op.peer = peer;
  return task;
}

void* NcclPluginEvents::kernel_channel_started(void* parent, int /*channel*/, uint64_t gpu_ns) {
  // NCCL passes the task's handle as the channel's parent; a task partrain did not follow
  // (nullptr) has no channels to time.
  if (parent == nullptr || !live_task(parent)) return nullptr;
  auto* task = static_cast<Task*>(parent);
  {
    std::lock_guard lock(task->mutex);
    if (++task->channels_started > task->op.channels) ++task->references;  // more than it said
  }
  auto* channel = new KernelChannel;
  channel->task = task;
  channel->start_ns = gpu_ns;
  return channel;
}

void NcclPluginEvents::kernel_channel_ended(void* handle, uint64_t gpu_ns) {
  if (handle == nullptr || *static_cast<HandleKind*>(handle) != HandleKind::kKernelChannel) return;
  auto* channel = static_cast<KernelChannel*>(handle);
  Task* task = channel->task;
  std::unique_lock lock(task->mutex);
  if (channel->ended) return;
  channel->ended = true;
  ++task->channels_ended;
  // A channel whose timers run backwards is not timed (a timer NCCL did not set reads 0).
  if (channel->start_ns > 0 && gpu_ns >= channel->start_ns) {
    NcclPluginOp& op = task->op;
    const auto start = static_cast<int64_t>(channel->start_ns);
    const auto end = static_cast<int64_t>(gpu_ns);
    op.gpu_start_ns = op.gpu_start_ns < 0 ? start : std::min(op.gpu_start_ns, start);
    op.gpu_end_ns = std::max(op.gpu_end_ns, end);
    ++op.channels_timed;
  }
  finish_if_complete(task, lock);
}

void NcclPluginEvents::stopped(void* handle) {
  if (handle == nullptr) return;
  if (*static_cast<HandleKind*>(handle) == HandleKind::kKernelChannel) {
    auto* channel = static_cast<KernelChannel*>(handle);
    Task* task = channel->task;
    {
      std::unique_lock lock(task->mutex);
      if (!channel->ended) {  // stopped without its end: it counts, untimed
        channel->ended = true;
        ++task->channels_ended;
        finish_if_complete(task, lock);
      }
    }
    delete channel;
    release(task);
    return;
  }
  auto* task = static_cast<Task*>(handle);
  {
    std::unique_lock lock(task->mutex);
    task->host_done = true;
    finish_if_complete(task, lock);
  }
  release(task);
}

void NcclPluginEvents::finish_if_complete(Task* task, std::unique_lock<std::mutex>& lock) {
  // Complete once the host is done with it and every channel NCCL gave it has ended (NCCL's
  // Inspector waits for the same); a task whose channels never all report is reported with its
  // last reference instead.
  if (task->reported || !task->host_done || task->channels_ended < task->op.channels) return;
  task->reported = true;
  NcclPluginOp op = task->op;
  lock.unlock();
  on_op_(op);
  lock.lock();
}

void NcclPluginEvents::flush() {
  std::vector<NcclPluginOp> unreported;
  {
    std::lock_guard lock(mutex_);
    for (void* handle : live_tasks_) {
      auto* task = static_cast<Task*>(handle);
      std::lock_guard task_lock(task->mutex);
      if (task->reported || !task->host_done) continue;
      task->reported = true;
      unreported.push_back(task->op);
    }
  }
  for (const NcclPluginOp& op : unreported) on_op_(op);
}

void NcclPluginEvents::release(Task* task) {
  std::optional<NcclPluginOp> unreported;
  {
    std::lock_guard lock(task->mutex);
    if (--task->references > 0) return;
    if (!task->reported) unreported = task->op;
  }
  {
    std::lock_guard lock(mutex_);
    live_tasks_.erase(task);
  }
  delete task;
  open_tasks_.fetch_sub(1, std::memory_order_relaxed);
  if (unreported) on_op_(*unreported);
}

}  // namespace partrain::profiler
