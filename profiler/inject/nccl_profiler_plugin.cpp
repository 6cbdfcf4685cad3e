// NCCL's profiler-plugin entry points (profiler/inject/nccl_profiler_abi.h). NCCL loads the
// library NCCL_PROFILER_PLUGIN names and takes the newest table it knows: ncclProfiler_v6
// (NCCL 2.29), _v5 (2.28), _v4 (2.27). Each version's calls are translated into the process's
// NcclPluginEvents. Init fails (NCCL then carries on without a plugin) in a process that is not
// traced. Events partrain does not follow get no handle, so NCCL reports nothing more of them.
#include "profiler/inject/nccl_profiler_plugin.h"

#include <atomic>

#include "profiler/inject/injected_process.h"
#include "profiler/inject/nccl_profiler_abi.h"

namespace partrain::profiler::inject {
namespace {

thread_local PluginContextsMadeHere* t_init_scope = nullptr;
std::atomic<int> g_version{0};  // what NCCL negotiated: set once, read by the interposition

// What partrain follows: tasks, their kernel channels' GPU timers, proxy operations (counted).
constexpr int kActivationMask = PARTRAIN_NCCL_PROFILE_COLL | PARTRAIN_NCCL_PROFILE_P2P |
                                PARTRAIN_NCCL_PROFILE_KERNEL_CH | PARTRAIN_NCCL_PROFILE_PROXY_OP;

ncclResult_t init(int version, void** context, uint64_t comm_hash, int* activation_mask, int nranks,
                  int rank) {
  InjectedProcess* process = InjectedProcess::current();
  if (process == nullptr || context == nullptr || activation_mask == nullptr) {
    return ncclInvalidUsage;
  }
  *context = &process->nccl_plugin().create_context(comm_hash, nranks, rank);
  *activation_mask = kActivationMask;
  process->plugin_join().context_created(comm_hash, nranks, rank);
  note_plugin_context(comm_hash);
  int expected = 0;
  g_version.compare_exchange_strong(expected, version);
  return ncclSuccess;
}

NcclPluginEvents::Context* context_of(void* context) {
  return static_cast<NcclPluginEvents::Context*>(context);
}

// The version-neutral part of a descriptor: v4's members have other types, the same names.
template <typename Descriptor>
void* start(NcclPluginEvents::Context& context, const Descriptor& descr) {
  NcclPluginEvents& events = context.events();
  switch (descr.type) {
    case PARTRAIN_NCCL_PROFILE_COLL:
      return events.collective_started(
          context, descr.coll.func != nullptr ? descr.coll.func : "", descr.coll.seq_number,
          descr.coll.count, descr.coll.algo != nullptr ? descr.coll.algo : "",
          descr.coll.proto != nullptr ? descr.coll.proto : "", descr.coll.n_channels);
    case PARTRAIN_NCCL_PROFILE_P2P:
      return events.p2p_started(context, descr.p2p.func != nullptr ? descr.p2p.func : "",
                                descr.p2p.count, descr.p2p.peer, descr.p2p.n_channels);
    case PARTRAIN_NCCL_PROFILE_KERNEL_CH:
      return events.kernel_channel_started(descr.parent_obj, descr.kernel_ch.channel_id,
                                           descr.kernel_ch.p_timer);
    case PARTRAIN_NCCL_PROFILE_PROXY_OP:
      context.proxy_op(descr.proxy_op.is_send != 0, descr.proxy_op.n_steps,
                       descr.proxy_op.chunk_size);
      return nullptr;
    default:
      return nullptr;
  }
}

template <typename Descriptor>
ncclResult_t start_event(void* context, void** handle, Descriptor* descr) {
  if (handle == nullptr) return ncclSuccess;
  *handle = nullptr;
  // Contexts belong to the process's tracing: once it has ended (exit), nothing is followed.
  if (context == nullptr || descr == nullptr || InjectedProcess::current() == nullptr) {
    return ncclSuccess;
  }
  *handle = start(*context_of(context), *descr);
  return ncclSuccess;
}

// Handles belong to the process's NcclPluginEvents; a process that stopped tracing (exit) has
// none left to follow.
ncclResult_t stop_event(void* handle) {
  if (handle == nullptr) return ncclSuccess;
  if (InjectedProcess* process = InjectedProcess::current()) process->nccl_plugin().stopped(handle);
  return ncclSuccess;
}

ncclResult_t record_event_state(void* handle, partrain_nccl_event_state_t state,
                                partrain_nccl_event_state_args_t* args) {
  if (handle == nullptr || args == nullptr || state != PARTRAIN_NCCL_STATE_KERNEL_CH_STOP) {
    return ncclSuccess;
  }
  if (InjectedProcess* process = InjectedProcess::current()) {
    process->nccl_plugin().kernel_channel_ended(handle, args->kernel_ch.p_timer);
  }
  return ncclSuccess;
}

// Contexts live as long as the process's NcclPluginEvents (their proxy counts are summed at
// exit).
ncclResult_t finalize(void* /*context*/) { return ncclSuccess; }

// v5 and v6 take the same arguments.
template <int kVersion>
ncclResult_t init_v5_on(void** context, uint64_t comm_hash, int* activation_mask,
                        const char* /*comm_name*/, int /*n_nodes*/, int nranks, int rank,
                        partrain_nccl_logger_t /*log*/) {
  return init(kVersion, context, comm_hash, activation_mask, nranks, rank);
}

ncclResult_t init_v4(void** context, int* activation_mask, const char* /*comm_name*/,
                     uint64_t comm_hash, int /*n_nodes*/, int nranks, int rank,
                     partrain_nccl_logger_t /*log*/) {
  return init(4, context, comm_hash, activation_mask, nranks, rank);
}

}  // namespace

void note_plugin_context(uint64_t comm_hash) {
  if (t_init_scope != nullptr) t_init_scope->comm_hashes_.push_back(comm_hash);
}

PluginContextsMadeHere::PluginContextsMadeHere() : outer_(t_init_scope) { t_init_scope = this; }
PluginContextsMadeHere::~PluginContextsMadeHere() { t_init_scope = outer_; }

int nccl_plugin_version() { return g_version.load(std::memory_order_relaxed); }

}  // namespace partrain::profiler::inject

namespace inject = partrain::profiler::inject;

// The tables NCCL looks up by name: C symbols, exported.
extern "C" {
__attribute__((visibility("default")))
partrain_nccl_profiler_v6_t ncclProfiler_v6 = {"partrain",
                                               inject::init_v5_on<6>,
                                               inject::start_event<partrain_nccl_event_descr_v6_t>,
                                               inject::stop_event,
                                               inject::record_event_state,
                                               inject::finalize};
__attribute__((visibility("default")))
partrain_nccl_profiler_v5_t ncclProfiler_v5 = {"partrain",
                                               inject::init_v5_on<5>,
                                               inject::start_event<partrain_nccl_event_descr_v5_t>,
                                               inject::stop_event,
                                               inject::record_event_state,
                                               inject::finalize};
__attribute__((visibility("default")))
partrain_nccl_profiler_v4_t ncclProfiler_v4 = {"partrain",
                                               inject::init_v4,
                                               inject::start_event<partrain_nccl_event_descr_v4_t>,
                                               inject::stop_event,
                                               inject::record_event_state,
                                               inject::finalize};
}  // extern "C"
