// NCCL interposition: libpartrain_inject.so defines NCCL's public entry points, so under
// LD_PRELOAD a program's calls land here first. Each wrapper finds the real function in whichever
// libnccl the program loaded (dlsym(RTLD_NEXT), or by soname where it was loaded privately; this
// library never links NCCL), passes the program's arguments through unchanged, returns NCCL's
// result unchanged, and tells the process's NcclTracker what happened. While a process is not traced the wrappers only forward.
#include <dlfcn.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>

#include "core/clock.h"
#include "profiler/inject/injected_process.h"
#include "profiler/inject/nccl_profiler_plugin.h"
#include "profiler/nccl_abi.h"

#define PARTRAIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace partrain::profiler::inject {
namespace {

// >0 while one of these wrappers runs on this thread: NCCL calling its own public API (ncclBcast
// is ncclBroadcast underneath) is forwarded without being recorded twice.
thread_local int t_wrapper_depth = 0;

// The next definition of `name` after this library: the real NCCL's. A libnccl loaded privately
// is not in the global scope RTLD_NEXT searches: PyTorch's, a dependency of a Python extension
// module that Python loads with RTLD_LOCAL (the program's calls still land here, since a
// preloaded library comes first for every lookup). Such a one is found by its soname where it
// was loaded (RTLD_NOLOAD: nothing is loaded that the program did not load).
template <typename Fn>
Fn next_definition(const char* name) {
  if (void* next = dlsym(RTLD_NEXT, name)) return reinterpret_cast<Fn>(next);
  for (const char* soname : {"libnccl.so.2", "libnccl.so"}) {
    void* library = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (library == nullptr) continue;
    void* symbol = dlsym(library, name);
    dlclose(library);  // the reference NOLOAD took; the program's own keeps it loaded
    if (symbol != nullptr) return reinterpret_cast<Fn>(symbol);
  }
  return nullptr;
}

// What a wrapper returns when the program reached it without any libnccl loaded (it looked the
// symbol up itself): the error NCCL gives for a system problem, said once on stderr.
ncclResult_t no_real_nccl(const char* name) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) {
    std::fprintf(stderr, "partrain: %s was called but no libnccl is loaded in this process\n",
                 name);
  }
  return ncclSystemError;
}

// One wrapper's stay on this thread: whether to record (outermost wrapper of a traced process),
// its correlation id and when it started. Calls that launch NCCL's kernels (collectives, p2p,
// group ends) link them to the call through CUPTI's external correlation (link_kernels) where
// NCCL's profiler plugin gives the call no GPU span (InjectedProcess::cupti_links_calls): the
// push, the pop and the launch callbacks cost the launching thread (docs/tracing.md, "What
// tracing costs"). Inits, splits and ends launch none worth linking.
class WrapperScope {
 public:
  WrapperScope()
      : outermost_(t_wrapper_depth++ == 0),
        process_(outermost_ ? InjectedProcess::current() : nullptr),
        torch_op_(process_ != nullptr ? TorchRecording::window().op : 0),
        // Inside a PyTorch op's window every call shares the window's id, so the op's kernels
        // are found together whichever call launched them.
        correlation_(process_ == nullptr ? 0
                     : torch_op_ != 0    ? TorchRecording::window().correlation
                                         : process_->next_correlation_id()),
        start_ns_(process_ != nullptr ? monotonic_ns() : 0) {}
  ~WrapperScope() {
    if (linked_ != nullptr) linked_->pop_correlation();
    --t_wrapper_depth;
  }
  WrapperScope(const WrapperScope&) = delete;
  WrapperScope& operator=(const WrapperScope&) = delete;

  // The kernels NCCL launches from here to the scope's end carry its correlation, when CUPTI
  // is to link a call on a communicator of `comm_nranks` ranks (0: not known).
  void link_kernels(int comm_nranks) {
    if (process_ == nullptr || linked_ != nullptr || !process_->cupti_links_calls(comm_nranks)) {
      return;
    }
    linked_ = process_->gpu();
    linked_->push_correlation(correlation_);
  }

  bool outermost() const { return outermost_; }
  InjectedProcess* process() const { return process_; }
  uint64_t correlation() const { return correlation_; }
  // The PyTorch op whose hook window this thread is in (0: none).
  uint64_t torch_op() const { return torch_op_; }
  int64_t start_ns() const { return start_ns_; }

 private:
  const bool outermost_;
  InjectedProcess* const process_;
  const uint64_t torch_op_;
  const uint64_t correlation_;
  const int64_t start_ns_;
  GpuTracing* linked_ = nullptr;  // the collection a correlation was pushed to
};

// The size and this rank of a communicator NCCL made without telling us (ncclCommShrink, or a
// split child), asked of the real NCCL.
void describe_comm(ncclComm_t comm, int& nranks, int& rank) {
  static const auto count = next_definition<decltype(&ncclCommCount)>("ncclCommCount");
  static const auto user_rank = next_definition<decltype(&ncclCommUserRank)>("ncclCommUserRank");
  nranks = 0;
  rank = 0;
  if (comm == nullptr) return;
  if (count != nullptr) (void)count(comm, &nranks);
  if (user_rank != nullptr) (void)user_rank(comm, &rank);
}

// A collective or p2p call: forwarded, then recorded with its outcome.
template <typename Forward>
ncclResult_t traced_call(const NcclCall& call, Forward forward) {
  WrapperScope scope;
  InjectedProcess* process = scope.process();
  if (process != nullptr) {
    if (!process->nccl().knows(call.comm)) {
      int nranks = 0;
      int rank = 0;
      describe_comm(call.comm, nranks, rank);
      process->nccl().comm_adopted(call.comm, nranks, rank);
    }
    // Inside a group NCCL launches nothing here: the group's end does, and links its kernels.
    if (process->gpu() != nullptr) {
      if (std::optional<int> nranks = process->nccl().launching_comm_nranks(call.comm)) {
        scope.link_kernels(*nranks);
      }
    }
  }
  const ncclResult_t result = forward();
  if (process != nullptr) {
    process->nccl().call_made(call, scope.correlation(), scope.start_ns(), monotonic_ns(), result,
                              scope.torch_op());
  }
  return result;
}

// The plugin contexts NCCL made inside a communicator's init belong to it. An init that made
// none, in a process whose tracing level asked for the plugin, with no context made anywhere:
// this NCCL did not load it, which is said once.
void bind_plugin_contexts(InjectedProcess& process, ncclComm_t comm,
                          const PluginContextsMadeHere& contexts, ncclResult_t result) {
  if (result != ncclSuccess && result != ncclInProgress) return;
  if (std::optional<NcclCommInfo> info = process.nccl().comm_info(comm)) {
    for (uint64_t hash : contexts.comm_hashes()) process.plugin_join().bind(hash, info->id);
  }
  const char* level = std::getenv("PARTRAIN_GPU_TRACE");
  if (contexts.comm_hashes().empty() && nccl_plugin_version() == 0 && level != nullptr &&
      level[0] != '\0') {
    using GetVersion = ncclResult_t (*)(int*);
    static const auto get_version = next_definition<GetVersion>("ncclGetVersion");
    int version = 0;
    if (get_version != nullptr && get_version(&version) != ncclSuccess) version = 0;
    process.plugin_not_offered(version);
  }
}

// ncclCommInitRank and friends: the first one of a process that is no rank yet makes it one, as
// its launcher rank, else the rank it asked NCCL for (a wrapper's child takes the rank over).
template <typename Forward>
ncclResult_t traced_init(ncclComm_t* comm, std::span<const ncclUniqueId> ids, int nranks,
                         int rank, const char* name, Forward forward) {
  if (t_wrapper_depth == 0) {
    InjectedProcess::start_as_rank(rank, InjectedProcess::RankSource::kCommunicator);
  }
  WrapperScope scope;
  PluginContextsMadeHere plugin_contexts;
  const ncclResult_t result = forward();
  if (InjectedProcess* process = scope.process()) {
    const ncclComm_t made = comm != nullptr ? *comm : nullptr;
    process->nccl().comm_initialised(made, ids, nranks, rank, name, scope.start_ns(),
                                     monotonic_ns(), result);
    bind_plugin_contexts(*process, made, plugin_contexts, result);
  }
  return result;
}

template <typename Forward>
ncclResult_t traced_end(ncclComm_t comm, const char* name, Forward forward) {
  WrapperScope scope;
  const ncclResult_t result = forward();
  if (InjectedProcess* process = scope.process()) {
    process->nccl().comm_ended(comm, name, scope.start_ns(), monotonic_ns(), result);
  }
  return result;
}

}  // namespace
}  // namespace partrain::profiler::inject

using partrain::profiler::NcclCall;
using partrain::profiler::inject::InjectedProcess;
using partrain::profiler::inject::next_definition;
using partrain::profiler::inject::no_real_nccl;
using partrain::profiler::inject::traced_call;
using partrain::profiler::inject::traced_end;
using partrain::profiler::inject::traced_init;
using partrain::profiler::inject::WrapperScope;

// Each entry point is defined twice, as NCCL exports it: ncclX, and pncclX, the same function
// under its profiling name (a profiling layer's own ncclX calls pncclX; programs built against
// such a layer call it directly). Both record alike, each forwarding to the real function of
// its own name, looked up once; a missing one is NCCL's system error.
// PARTRAIN_ENTRY_POINT(name, (params), (args)) { body }: the body sees the real function as
// `next`.
#define PARTRAIN_UNPARENTHESIZE(...) __VA_ARGS__
#define PARTRAIN_FORWARD_AS(symbol, name, params, args)                            \
  PARTRAIN_EXPORT ncclResult_t symbol params {                                      \
    static const auto next = next_definition<decltype(&name)>(#symbol);             \
    if (next == nullptr) return no_real_nccl(#symbol);                              \
    return name##_traced(next PARTRAIN_UNPARENTHESIZE args);                        \
  }
#define PARTRAIN_ENTRY_POINT(name, params, args)                                       \
  static ncclResult_t name##_traced(decltype(&name) next,                              \
                                    PARTRAIN_UNPARENTHESIZE params);                   \
  PARTRAIN_FORWARD_AS(name, name, params, (, PARTRAIN_UNPARENTHESIZE args))           \
  PARTRAIN_FORWARD_AS(p##name, name, params, (, PARTRAIN_UNPARENTHESIZE args))        \
  static ncclResult_t name##_traced(decltype(&name) next, PARTRAIN_UNPARENTHESIZE params)
#define PARTRAIN_ENTRY_POINT_WITHOUT_ARGUMENTS(name)                                   \
  static ncclResult_t name##_traced(decltype(&name) next);                             \
  PARTRAIN_FORWARD_AS(name, name, (void), ())                                          \
  PARTRAIN_FORWARD_AS(p##name, name, (void), ())                                       \
  static ncclResult_t name##_traced(decltype(&name) next)

PARTRAIN_ENTRY_POINT(ncclCommInitRank, (ncclComm_t* comm, int nranks, ncclUniqueId comm_id,
                                        int rank),
                     (comm, nranks, comm_id, rank)) {
  return traced_init(comm, std::span(&comm_id, 1), nranks, rank, "ncclCommInitRank",
                     [&] { return next(comm, nranks, comm_id, rank); });
}

PARTRAIN_ENTRY_POINT(ncclCommInitRankConfig, (ncclComm_t* comm, int nranks, ncclUniqueId comm_id,
                                              int rank, ncclConfig_t* config),
                     (comm, nranks, comm_id, rank, config)) {
  return traced_init(comm, std::span(&comm_id, 1), nranks, rank, "ncclCommInitRankConfig",
                     [&] { return next(comm, nranks, comm_id, rank, config); });
}

PARTRAIN_ENTRY_POINT(ncclCommInitRankScalable, (ncclComm_t* comm, int nranks, int rank, int n_ids,
                                                ncclUniqueId* comm_ids, ncclConfig_t* config),
                     (comm, nranks, rank, n_ids, comm_ids, config)) {
  const size_t ids = comm_ids != nullptr && n_ids > 0 ? static_cast<size_t>(n_ids) : 0;
  return traced_init(comm, std::span<const ncclUniqueId>(comm_ids, ids), nranks, rank,
                     "ncclCommInitRankScalable",
                     [&] { return next(comm, nranks, rank, n_ids, comm_ids, config); });
}

PARTRAIN_ENTRY_POINT(ncclCommInitAll, (ncclComm_t* comms, int ndev, const int* devlist),
                     (comms, ndev, devlist)) {
  if (partrain::profiler::inject::t_wrapper_depth == 0) {
    InjectedProcess::start_as_rank(0, InjectedProcess::RankSource::kCommunicator);
  }
  WrapperScope scope;
  const ncclResult_t result = next(comms, ndev, devlist);
  if (InjectedProcess* process = scope.process(); process != nullptr && comms != nullptr) {
    const int64_t end_ns = partrain::monotonic_ns();
    for (int i = 0; i < ndev; ++i) {
      process->nccl().comm_initialised_all(comms[i], i, ndev, scope.start_ns(), end_ns, result);
    }
  }
  return result;
}

PARTRAIN_ENTRY_POINT(ncclCommSplit, (ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                     ncclConfig_t* config),
                     (comm, color, key, newcomm, config)) {
  WrapperScope scope;
  partrain::profiler::inject::PluginContextsMadeHere plugin_contexts;
  const ncclResult_t result = next(comm, color, key, newcomm, config);
  if (InjectedProcess* process = scope.process()) {
    ncclComm_t child = newcomm != nullptr ? *newcomm : nullptr;
    int nranks = 0;
    int rank = 0;
    if (result == ncclSuccess) partrain::profiler::inject::describe_comm(child, nranks, rank);
    process->nccl().comm_split(comm, color, child, nranks, rank, scope.start_ns(),
                               partrain::monotonic_ns(), result);
    if (child != nullptr) {
      partrain::profiler::inject::bind_plugin_contexts(*process, child, plugin_contexts, result);
    }
  }
  return result;
}

PARTRAIN_ENTRY_POINT(ncclCommFinalize, (ncclComm_t comm), (comm)) {
  return traced_end(comm, "ncclCommFinalize", [&] { return next(comm); });
}

PARTRAIN_ENTRY_POINT(ncclCommDestroy, (ncclComm_t comm), (comm)) {
  return traced_end(comm, "ncclCommDestroy", [&] { return next(comm); });
}

PARTRAIN_ENTRY_POINT(ncclCommAbort, (ncclComm_t comm), (comm)) {
  return traced_end(comm, "ncclCommAbort", [&] { return next(comm); });
}

PARTRAIN_ENTRY_POINT(ncclAllReduce, (const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                     cudaStream_t stream),
                     (sendbuff, recvbuff, count, datatype, op, comm, stream)) {
  return traced_call({"all_reduce", comm, count, datatype, op, -1, -1, stream},
                     [&] { return next(sendbuff, recvbuff, count, datatype, op, comm, stream); });
}

PARTRAIN_ENTRY_POINT(ncclBroadcast, (const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, int root, ncclComm_t comm,
                                     cudaStream_t stream),
                     (sendbuff, recvbuff, count, datatype, root, comm, stream)) {
  return traced_call({"broadcast", comm, count, datatype, std::nullopt, -1, root, stream},
                     [&] { return next(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

PARTRAIN_ENTRY_POINT(ncclBcast, (void* buff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream),
                     (buff, count, datatype, root, comm, stream)) {
  return traced_call({"broadcast", comm, count, datatype, std::nullopt, -1, root, stream},
                     [&] { return next(buff, count, datatype, root, comm, stream); });
}

PARTRAIN_ENTRY_POINT(ncclReduce, (const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, ncclRedOp_t op, int root,
                                  ncclComm_t comm, cudaStream_t stream),
                     (sendbuff, recvbuff, count, datatype, op, root, comm, stream)) {
  return traced_call(
      {"reduce", comm, count, datatype, op, -1, root, stream},
      [&] { return next(sendbuff, recvbuff, count, datatype, op, root, comm, stream); });
}

PARTRAIN_ENTRY_POINT(ncclAllGather, (const void* sendbuff, void* recvbuff, size_t sendcount,
                                     ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream),
                     (sendbuff, recvbuff, sendcount, datatype, comm, stream)) {
  return traced_call({"all_gather", comm, sendcount, datatype, std::nullopt, -1, -1, stream},
                     [&] { return next(sendbuff, recvbuff, sendcount, datatype, comm, stream); });
}

PARTRAIN_ENTRY_POINT(ncclReduceScatter, (const void* sendbuff, void* recvbuff, size_t recvcount,
                                         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                         cudaStream_t stream),
                     (sendbuff, recvbuff, recvcount, datatype, op, comm, stream)) {
  return traced_call(
      {"reduce_scatter", comm, recvcount, datatype, op, -1, -1, stream},
      [&] { return next(sendbuff, recvbuff, recvcount, datatype, op, comm, stream); });
}

PARTRAIN_ENTRY_POINT(ncclAlltoAll, (const void* sendbuff, void* recvbuff, size_t count,
                                    ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream),
                     (sendbuff, recvbuff, count, datatype, comm, stream)) {
  return traced_call({"all_to_all", comm, count, datatype, std::nullopt, -1, -1, stream},
                     [&] { return next(sendbuff, recvbuff, count, datatype, comm, stream); });
}

PARTRAIN_ENTRY_POINT(ncclGather, (const void* sendbuff, void* recvbuff, size_t count,
                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                  cudaStream_t stream),
                     (sendbuff, recvbuff, count, datatype, root, comm, stream)) {
  return traced_call({"gather", comm, count, datatype, std::nullopt, -1, root, stream},
                     [&] { return next(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

PARTRAIN_ENTRY_POINT(ncclScatter, (const void* sendbuff, void* recvbuff, size_t count,
                                   ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream),
                     (sendbuff, recvbuff, count, datatype, root, comm, stream)) {
  return traced_call({"scatter", comm, count, datatype, std::nullopt, -1, root, stream},
                     [&] { return next(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

PARTRAIN_ENTRY_POINT(ncclSend, (const void* sendbuff, size_t count, ncclDataType_t datatype,
                                int peer, ncclComm_t comm, cudaStream_t stream),
                     (sendbuff, count, datatype, peer, comm, stream)) {
  return traced_call({"send", comm, count, datatype, std::nullopt, peer, -1, stream},
                     [&] { return next(sendbuff, count, datatype, peer, comm, stream); });
}

PARTRAIN_ENTRY_POINT(ncclRecv, (void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                ncclComm_t comm, cudaStream_t stream),
                     (recvbuff, count, datatype, peer, comm, stream)) {
  return traced_call({"recv", comm, count, datatype, std::nullopt, peer, -1, stream},
                     [&] { return next(recvbuff, count, datatype, peer, comm, stream); });
}

PARTRAIN_ENTRY_POINT_WITHOUT_ARGUMENTS(ncclGroupStart) {
  WrapperScope scope;
  const ncclResult_t result = next();
  if (InjectedProcess* process = scope.process(); process != nullptr && result == ncclSuccess) {
    process->nccl().group_started();
  }
  return result;
}

PARTRAIN_ENTRY_POINT_WITHOUT_ARGUMENTS(ncclGroupEnd) {
  WrapperScope scope;
  if (InjectedProcess* process = scope.process(); process != nullptr && process->gpu() != nullptr) {
    scope.link_kernels(process->nccl().open_group_fewest_ranks());
  }
  const ncclResult_t result = next();
  if (InjectedProcess* process = scope.process()) {
    process->nccl().group_ended(scope.correlation(), partrain::monotonic_ns(), result);
  }
  return result;
}
