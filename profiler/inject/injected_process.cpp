#include "profiler/inject/injected_process.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <thread>

#include "core/clock.h"
#include "core/env.h"
#include "core/log.h"
#include "core/thread_start.h"
#include "profiler/host_refusal.h"
#include "profiler/inject/nccl_profiler_plugin.h"
#include "profiler/nvml/nvml_counter_source.h"
#include "profiler/rank_gpu_counters.h"

namespace partrain::profiler::inject {
namespace {

std::atomic<InjectedProcess*> g_current{nullptr};
std::mutex g_start_mutex;  // also orders cuda_initialised() against start()
bool g_cuda_initialised = false;

// A launcher variable as a rank number; unset, malformed or absurd values are "no rank".
std::optional<int> env_int(std::string_view name) {
  auto value = env::get_int(name);
  if (!value.is_ok() || !*value || **value < 0 || **value > (1 << 24)) return std::nullopt;
  return static_cast<int>(**value);
}

// The process's world rank as the common launchers publish it, and the variable that says it.
struct LauncherRank {
  int rank;
  const char* variable;
};

std::optional<LauncherRank> launcher_rank() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (std::optional<int> rank = env_int(name)) return LauncherRank{*rank, name};
  }
  return std::nullopt;
}

std::optional<int> launcher_world_size() {
  for (const char* name : {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    if (std::optional<int> size = env_int(name)) return size;
  }
  return std::nullopt;
}

// Whether the parent process has `variable` ("RANK=3") in its environment: then this process is
// a helper the rank started (a shell, a compiler, a data loader exec'd), not the rank itself.
bool parent_has(const std::string& variable) {
  const std::string path = "/proc/" + std::to_string(::getppid()) + "/environ";
  std::FILE* environ_file = std::fopen(path.c_str(), "r");
  if (environ_file == nullptr) return false;
  std::string entry;
  bool found = false;
  for (int c = std::fgetc(environ_file); !found && c != EOF; c = std::fgetc(environ_file)) {
    if (c != '\0') {
      entry.push_back(static_cast<char>(c));
      continue;
    }
    found = entry == variable;
    entry.clear();
  }
  std::fclose(environ_file);
  return found || entry == variable;
}

// Whether the parent is `partrain trace` itself (PARTRAIN_TRACER_PID, runner/launch/
// traced_command.cpp): the command it started.
bool parent_is_tracer() {
  const std::optional<int> tracer = env_int("PARTRAIN_TRACER_PID");
  return tracer && *tracer == static_cast<int>(::getppid());
}

// Whether the process that started this one was given the same launcher rank (the same
// variable with the same value): this one is then a helper of that rank (a compiler, a data
// loader), the program a wrapper runs (`bash run.sh` -> python), or one of the processes a rank
// spawns (torch.multiprocessing's, which all inherit an sbatch script's SLURM_PROCID), and
// records the rank only once it acts as one. The command `partrain trace` started is the rank
// even when the variable came from outside, set for the tracer too (`RANK=0 partrain trace --
// python train.py`): the tracer is no rank.
bool started_by_same_rank(const LauncherRank& published) {
  return parent_has(fmt::format("{}={}", published.variable, published.rank)) &&
         !parent_is_tracer();
}

// The process that records its rank with process groups of its own, as partrain's Python module
// marks it (PARTRAIN_GROUPS_PID, _process_groups.py) for the processes it starts, when that is
// not this one.
std::optional<int> groups_recorded_by_another() {
  const std::optional<int> owner = env_int("PARTRAIN_GROUPS_PID");
  if (!owner || *owner == static_cast<int>(::getpid())) return std::nullopt;
  return owner;
}

// A process a rank started that builds a process group of its own (an evaluation tool's private
// single-process group) is left untraced: taking the rank over would give the rank its pid and
// write its ops under the rank's own group names, colliding with the rank's. Said once per
// process, as the rank's.
void say_left_untraced(int rank, int owner) {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  std::unique_ptr<RankTracer> tracer = RankTracer::from_env(rank);
  if (!tracer) return;
  tracer->emit(StatEvent{
      "rank_subprocess_untraced", rank, 1, StatSeverity::kInfo,
      fmt::format("a process rank {} (pid {}) started set up a communicator or process group of "
                  "its own (pid {}): it is not recorded, and the rank stays pid {}'s",
                  rank, owner, ::getpid(), owner)});
  (void)tracer->flush(std::chrono::milliseconds(500));
}

// A fork()ed child has none of the tracer's threads: it is not traced (an exec'd program that
// is a rank starts afresh through the constructor).
void forget_in_child() { g_current.store(nullptr); }

void stop_at_exit() { (void)InjectedProcess::stop(); }

}  // namespace

InjectedProcess* InjectedProcess::current() { return g_current.load(std::memory_order_acquire); }

bool InjectedProcess::tracing_in_this_process() {
  const InjectedProcess* process = current();
  return process != nullptr && process->pid_ == ::getpid();
}

InjectedProcess::InjectedProcess(std::unique_ptr<RankTracer> tracer, int world_size)
    : tracer_(std::move(tracer)),
      gpu_sink_(*tracer_),
      nccl_([this](const NcclCallRecord& record) { record_call(record); },
            [this](const NcclCommEvent& event) { record_comm(event); }, tracer_->rank(),
            world_size),
      torch_(*tracer_, [this](const NcclCallRecord& record) { deliver_call(record); }),
      nccl_plugin_([this](const NcclPluginOp& op) { plugin_join_.op_reported(op); }),
      plugin_join_([this](const NcclCallRecord& record, const NcclPluginOp* report) {
        deliver_joined(record, report);
      }),
      realtime_offset_ns_(wall_ns() - monotonic_ns()),
      start_ns_(monotonic_ns()),
      pid_(::getpid()) {
  const std::string expression =
      env::get(kStepMarkerEnv).value_or(std::string(kDefaultStepMarker));
  auto marker = StepMarker::compile(expression);
  if (!marker.is_ok()) {
    std::fprintf(stderr, "partrain: %s: the default is used\n", marker.status().message().c_str());
    marker = StepMarker::compile(kDefaultStepMarker);
  }
  if (marker.is_ok()) step_marker_ = std::move(marker).value();
}

std::optional<int64_t> InjectedProcess::step_started(std::string_view range_name) {
  std::optional<int64_t> step;
  {
    std::lock_guard lock(step_marker_mutex_);
    if (step_marker_) step = step_marker_->step_of(range_name);
  }
  if (step) {
    nvtx_marks_steps_.store(true, std::memory_order_relaxed);
    tracer_->set_step(*step);
  }
  return step;
}

void InjectedProcess::range_ended(std::string_view name, int64_t start_ns, int64_t end_ns,
                                  std::optional<int64_t> marked_step, int64_t step_at_start) {
  if (!marked_step) {
    tracer_->slice(name, SliceCategory::kPhase, start_ns, end_ns, -1, -1, step_at_start);
    return;
  }
  step_ended(*marked_step, start_ns, end_ns);
}

void InjectedProcess::step_ended(int64_t step, int64_t start_ns, int64_t end_ns) {
  tracer_->slice("step", SliceCategory::kStep, start_ns, end_ns, -1, -1, step);
  tracer_->step_done(step, start_ns, end_ns, std::numeric_limits<double>::quiet_NaN(), 0);
  if (GpuTracing* gpu_tracing = gpu()) gpu_tracing->flush();  // the step's kernels, promptly
}

InjectedProcess* InjectedProcess::start_at_load() {
  std::lock_guard lock(g_start_mutex);
  if (InjectedProcess* process = current()) return process;
  const std::optional<LauncherRank> published = launcher_rank();
  if (!published || started_by_same_rank(*published)) return nullptr;
  return begin(published->rank);
}

InjectedProcess* InjectedProcess::start_as_rank(std::optional<int> rank, RankSource source) {
  std::lock_guard lock(g_start_mutex);
  if (InjectedProcess* process = current()) return process;
  const std::optional<LauncherRank> published = launcher_rank();
  if (const std::optional<int> owner = groups_recorded_by_another()) {
    if (const std::optional<int> owners_rank = published ? published->rank : rank) {
      say_left_untraced(*owners_rank, *owner);
    }
    return nullptr;
  }
  if (!published) return begin(rank);
  const bool inherited = started_by_same_rank(*published);
  // An inherited variable is the parent's rank, not this process's: the processes a rank
  // spawns (mp.spawn under an sbatch script's SLURM_PROCID=0) all carry it, and each is the
  // rank its process group says.
  if (inherited && source == RankSource::kWorld && rank && *rank != published->rank) {
    InjectedProcess* process = begin(rank);
    if (process != nullptr) {
      process->tracer_->emit(StatEvent{
          "launcher_rank_inherited", *rank, 1, StatSeverity::kInfo,
          fmt::format("the process inherited {}={} from the process that started it (which has "
                      "it too) and its process group made it rank {}: it is recorded as rank {}",
                      published->variable, published->rank, *rank, *rank)});
    }
    return process;
  }
  InjectedProcess* process = begin(published->rank);
  if (process != nullptr && inherited) {
    process->tracer_->emit(StatEvent{
        "rank_process_taken_over", published->rank, 1, StatSeverity::kInfo,
        fmt::format("the process the launcher started as rank {} (a shell wrapper, or a "
                    "launcher under a launcher) set up no communicator or process group; one it "
                    "started did, and is the rank from then on (its pid is the rank's)",
                    published->rank)});
  }
  return process;
}

InjectedProcess* InjectedProcess::begin(std::optional<int> rank) {
  // partrain's own binary records itself (runner/worker/rank_tracing.h); it exports this symbol.
  if (dlsym(RTLD_DEFAULT, "partrain_records_itself") != nullptr) return nullptr;
  if (!rank) return nullptr;
  std::unique_ptr<RankTracer> tracer = RankTracer::from_env(*rank);
  if (!tracer) return nullptr;
  RankInfo info;
  info.rank = *rank;
  info.local_rank = env_int("LOCAL_RANK").value_or(0);
  info.node = env_int("GROUP_RANK").value_or(0);
  std::array<char, 256> host{};
  ::gethostname(host.data(), host.size() - 1);
  info.host = host.data();
  info.pid = ::getpid();
  info.device = "cpu";
  tracer->emit(info);
  if (std::optional<int> world_size = launcher_world_size()) {
    RunInfo run;  // only the world size: the run id and command are the tracer's
    run.world_size = *world_size;
    tracer->emit(run);
  }
  // Who the rank is reaches the collector before this process starts another: the ranks table
  // keeps a rank's last row, and a child that takes the rank over (start_as_rank) must be last.
  (void)tracer->flush(std::chrono::milliseconds(500));
  auto* process = new InjectedProcess(std::move(tracer), launcher_world_size().value_or(0));
  if (g_cuda_initialised) process->start_gpu_tracing();
  process->start_gpu_counters();
  process->flight_ = RankFlight::start(process->torch_.flight_recorder(), *process->tracer_);
  g_current.store(process, std::memory_order_release);
  if (Status flusher = start_exit_flusher(); !flusher.is_ok()) {
    report_host_refusal(*process->tracer_, "exit_flush_unavailable", flusher,
                        "no flush before _exit: if the process ends with _exit (os._exit, a "
                        "shell's exit), the events it had not shipped yet are lost");
  }
  static std::once_flag hooks;
  std::call_once(hooks, [] {
    ::pthread_atfork(nullptr, nullptr, forget_in_child);
    std::atexit(stop_at_exit);
  });
  return process;
}

// NVML's counters of the rank's GPU, sampled from now on; without a driver, nothing is said.
void InjectedProcess::start_gpu_counters() {
  gpu_counters_ = start_rank_gpu_counters(*tracer_, nvml_device_for_process());
}

void InjectedProcess::cuda_initialised() {
  std::lock_guard lock(g_start_mutex);
  g_cuda_initialised = true;
  if (InjectedProcess* process = current()) process->start_gpu_tracing();
}

void InjectedProcess::start_gpu_tracing() {
  if (gpu_owner_) return;
  gpu_owner_ = profiler::start_gpu_tracing(gpu_sink_);
  gpu_.store(gpu_owner_.get(), std::memory_order_release);
}

// Runs from atexit(), before the static destructors the tracer's code depends on. exit() has
// already destroyed this thread's thread_locals (the recorder's buffer registration among
// them), so the last events are recorded from a fresh thread.
bool InjectedProcess::stop() {
  // Only the process that started it: a vfork()ed child shares its parent's memory (and exec's
  // from it), and must leave the parent's tracing as it is.
  InjectedProcess* process = current();
  if (process == nullptr || process->pid_ != ::getpid()) return false;
  if (!g_current.compare_exchange_strong(process, nullptr)) return false;
  // No dump from here on: the recorder and the tracer go with the process.
  if (process->flight_ != nullptr) process->flight_->close();
  const int64_t end_ns = monotonic_ns();
  std::thread last_records;
  const Status started = start_thread(last_records, [process, end_ns] {
    process->nccl_.flush_open_groups(end_ns);
    process->torch_.flush();  // NCCL calls whose PyTorch record never came
    process->nccl_plugin_.flush();  // tasks whose kernel channels never all came
    process->plugin_join_.flush();  // rows whose plugin report never came
    process->record_plugin_stats();
    if (process->gpu_counters_) process->gpu_counters_->stop();  // with a last sample
    // Kernels still in CUPTI's buffers. The program's CUDA may be torn down by now (libraries
    // loaded after this one ran their destructors first): CUPTI is left enabled.
    if (GpuTracing* gpu = process->gpu()) gpu->stop_at_exit();
    process->tracer_->main_track_slice("process", SliceCategory::kPhase, process->start_ns_,
                                       end_ns);
  });
  if (started.is_ok()) {
    last_records.join();
  } else {
    // This thread's recorder registration is gone: nothing more can be recorded from it, not
    // even a stat, so the loss is said here only.
    log::warn(
        "rank {}: {}: the process's last records (open NCCL groups, kernels still in "
        "CUPTI's buffers, its process slice) are not recorded",
        process->tracer_->rank(), started.message());
  }
  (void)process->gpu_owner_.release();  // never destroyed: CUPTI may call into it until the end
  delete process;  // flushes and says goodbye to the collector
  return true;
}

void InjectedProcess::record_call(const NcclCallRecord& record) {
  plugin_join_.call_recorded(record);
  torch_.nccl_call(record);
}

void InjectedProcess::deliver_call(const NcclCallRecord& record) { plugin_join_.deliver(record); }

bool InjectedProcess::cupti_links_calls(int comm_nranks) const {
  return gpu() != nullptr && (nccl_plugin_version() == 0 || comm_nranks <= 1);
}

void InjectedProcess::deliver_joined(const NcclCallRecord& record, const NcclPluginOp* report) {
  if (report != nullptr) {
    CollectiveEvent event = record.event;
    event.algorithm = report->algorithm;
    event.protocol = report->protocol;
    event.channels = report->channels;
    int64_t gpu_start = -1;
    int64_t gpu_end = -1;
    if (report->gpu_start_ns >= 0) {
      gpu_start = report->gpu_start_ns - realtime_offset_ns_;
      gpu_end = report->gpu_end_ns - realtime_offset_ns_;
      // The GPU ran it after the call was made, and within a minute of its return (else the
      // GPU's clock is not the host's Unix time): otherwise its span is not placed.
      constexpr int64_t kSlackNs = 1'000'000'000LL;
      constexpr int64_t kLongestNs = 60'000'000'000LL;
      if (gpu_start < event.enqueue_ns - kSlackNs || gpu_end > event.end_ns + kLongestNs) {
        gpu_clock_unaligned_.fetch_add(1, std::memory_order_relaxed);
        gpu_start = gpu_end = -1;
      }
    }
    if (gpu_start >= 0 || !cupti_links_calls(event.group_size) || record.correlation == 0) {
      tracer_->collective(event, gpu_start, gpu_end);
      return;
    }
    NcclCallRecord described = record;  // CUPTI's kernels place it instead
    described.event = std::move(event);
    gpu()->add_nccl_call(described);
    return;
  }
  // Without a correlation (a PyTorch op that made no NCCL call: gloo) no kernel is its.
  if (cupti_links_calls(record.event.group_size) && record.correlation != 0) {
    gpu()->add_nccl_call(record);  // waits for its kernels' GPU times
  } else {
    tracer_->collective(record.event);
  }
}

void InjectedProcess::plugin_not_offered(int nccl_version) {
  if (plugin_absence_said_.exchange(true)) return;
  const std::string version =
      nccl_version > 0 ? fmt::format("NCCL {}.{}.{}", nccl_version / 10000,
                                     nccl_version / 100 % 100, nccl_version % 100)
                       : std::string("this NCCL");
  std::fprintf(stderr,
               "partrain: %s did not load partrain's profiler plugin (NCCL_PROFILER_PLUGIN; "
               "interface v4 or later, NCCL 2.27 on): collectives keep the interposition's "
               "host times%s\n",
               version.c_str(), gpu() != nullptr ? " and CUPTI's kernel times" : "");
  tracer_->emit(StatEvent{"nccl_plugin_absent", tracer_->rank(), 1, StatSeverity::kInfo,
                          "NCCL did not load partrain's profiler plugin (it offers no "
                          "interface v4+, or NCCL_PROFILER_PLUGIN named another): collectives "
                          "have host times (and CUPTI's kernel times where collected)"});
}

void InjectedProcess::record_plugin_stats() {
  const NcclPluginJoinStats join = plugin_join_.stats();
  const NcclProxySummary proxy = nccl_plugin_.proxy_summary();
  const int rank = tracer_->rank();
  auto stat = [&](const char* name, uint64_t value, StatSeverity severity,
                  const char* description) {
    if (value > 0) {
      tracer_->emit(StatEvent{name, rank, static_cast<int64_t>(value), severity, description});
    }
  };
  stat("nccl_plugin_joined", join.joined, StatSeverity::kInfo,
       "collectives joined to NCCL's profiler plugin report (algorithm, protocol, channels, "
       "kernel channels' GPU span)");
  stat("nccl_plugin_host_only", join.host_only, StatSeverity::kInfo,
       "collectives the plugin was expected to report but did not: host times only");
  stat("nccl_plugin_unmatched", join.unmatched, StatSeverity::kInfo,
       "plugin reports no interposed call was found for");
  stat("nccl_plugin_gpu_clock_unaligned", gpu_clock_unaligned_.load(), StatSeverity::kInfo,
       "plugin GPU spans not placed: the GPU timer did not read as the host's Unix time");
  stat("nccl_proxy_ops", proxy.ops, StatSeverity::kInfo,
       "NCCL proxy operations (network transfers), counted by the profiler plugin");
  stat("nccl_proxy_send_bytes", proxy.send_bytes, StatSeverity::kInfo,
       "bytes NCCL's proxy operations sent, at most (steps x chunk size)");
  stat("nccl_proxy_recv_bytes", proxy.recv_bytes, StatSeverity::kInfo,
       "bytes NCCL's proxy operations received, at most (steps x chunk size)");
}

void InjectedProcess::record_comm(const NcclCommEvent& event) {
  SliceEvent slice;
  slice.rank = tracer_->rank();
  slice.track_kind = TrackKind::kComm;
  slice.track = event.comm_id;
  const bool failed = event.result != ncclSuccess && event.result != ncclInProgress;
  slice.name = failed ? fmt::format("{} -> {}", event.call, nccl_result_name(event.result))
                      : std::string(event.call);
  slice.category = SliceCategory::kPhase;
  slice.ts_ns = tracer_->timeline_ns(event.start_ns);
  slice.dur_ns = event.end_ns - event.start_ns;
  slice.step = tracer_->step();
  tracer_->emit(slice);
  if (failed) {
    tracer_->emit(StatEvent{"nccl_failed_calls", tracer_->rank(), 1, StatSeverity::kInfo,
                            "NCCL calls of the traced program that returned an error (each is a "
                            "slice '<call> -> <error>' on its communicator's track)"});
  }
}

}  // namespace partrain::profiler::inject
