// libpartrain_inject.so's entry: loaded into every process of a `partrain trace` command (through
// LD_PRELOAD, and CUDA_INJECTION64_PATH for CUDA programs), it makes each rank of a foreign job
// (a process with RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID set) a rank of the trace:
// who it is (host, pid, local rank, node) and how long it lived. NCCL interposition and CUPTI
// activity are added here by the GPU tracing issue. It never disturbs its host: no collector, no
// rank, or partrain's own workers (which record themselves) mean it stays inert.
// The process slice is written when the process exits through exit() (a return from main too).
#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/clock.h"
#include "core/env.h"
#include "profiler/rank_tracer.h"

namespace partrain::profiler {
namespace {

// A launcher variable as a rank number; unset, malformed or absurd values are "no rank".
std::optional<int> env_int(std::string_view name) {
  auto value = env::get_int(name);
  if (!value.is_ok() || !*value || **value < 0 || **value > (1 << 24)) return std::nullopt;
  return static_cast<int>(**value);
}

// The process's world rank as the common launchers publish it.
std::optional<int> launcher_rank() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (std::optional<int> rank = env_int(name)) return rank;
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

struct InjectedProcess {
  std::unique_ptr<RankTracer> tracer;
  int64_t start_ns = 0;
  pid_t pid = 0;  // a fork()ed child inherits this object but none of the tracer's threads
};
InjectedProcess* g_process = nullptr;

// Registered with atexit() once the tracer exists, so it runs before the static destructors the
// tracer's code depends on. exit() has already destroyed this thread's thread_locals (the
// recorder's buffer registration among them), so the last slice is recorded from a fresh thread.
void partrain_inject_stop() {
  if (g_process == nullptr || g_process->pid != ::getpid()) return;
  const int64_t end_ns = monotonic_ns();
  std::thread([end_ns] {
    g_process->tracer->slice("process", SliceCategory::kPhase, g_process->start_ns, end_ns);
  }).join();
  delete g_process;  // flushes and says goodbye to the collector
  g_process = nullptr;
}

__attribute__((constructor)) void partrain_inject_start() {
  // partrain's own binary records itself (runner/worker/rank_tracing.h); it exports this symbol.
  if (dlsym(RTLD_DEFAULT, "partrain_records_itself") != nullptr) return;
  std::optional<int> rank = launcher_rank();
  if (!rank || parent_has("RANK=" + std::to_string(*rank))) return;
  std::unique_ptr<RankTracer> tracer = RankTracer::from_env(*rank);
  if (!tracer) return;
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
  g_process = new InjectedProcess{std::move(tracer), monotonic_ns(), ::getpid()};
  std::atexit(partrain_inject_stop);
}

}  // namespace
}  // namespace partrain::profiler
