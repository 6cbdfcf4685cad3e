// A traced rank that replaces itself with exec: pyenv's shims (bash scripts exec'ing bash scripts
// exec'ing python), `#!/usr/bin/env python3` (env execs python), `sh -c 'exec prog'`. The new
// image traces itself again from the library's constructor (LD_PRELOAD is inherited, the rank
// variables too), on a new connection; the old image's connection ends with the exec. Without
// this it ended without a goodbye, which the collector counts as a crash (and whatever the old
// image had not shipped was lost). So exec() first ends the old image's tracing as exit does
// (flushed, goodbye), then calls the real exec; when that fails the process goes on, traced
// again. The exec family members a program calls through its PLT are wrapped: execve (shells,
// CPython's os.execv), execv, execvp (env), execvpe, fexecve. glibc's execl* reach execve
// inside libc, unseen: a process that execs through them still shows as an unclean end.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "core/subprocess.h"
#include "profiler/inject/injected_process.h"
#include "profiler/inject/rank_flight.h"

#define PARTRAIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace partrain::profiler::inject {

// How long an exec waits for a stop signal's dump and flush (rank_flight.h), whose flush waits
// up to 2 s for the collector.
constexpr std::chrono::milliseconds kStopSignalSettleLimit{3000};

template <typename Fn>
Fn next_exec(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// Whether an exec of `path` (execve, execv: no PATH search) or of `file` (execvp: searched along
// PATH) may succeed: an exec that will fail at once (shells and execvp try every PATH directory
// in turn) leaves the tracing as it is, instead of ending and restarting it, a new connection each
// time. find_executable looks as execvp does.
bool may_exec(const char* path) {
  if (path == nullptr || *path == '\0') return false;
  return find_executable(std::strchr(path, '/') != nullptr ? path : std::string("./") + path, "") ==
         0;
}

bool may_exec_on_path(const char* file) {
  if (file == nullptr || *file == '\0') return false;
  const char* path = std::getenv("PATH");
  return find_executable(file, path != nullptr ? path : "/bin:/usr/bin") == 0;
}

// Runs the real exec with the rank's tracing ended first, when it may succeed; restarts it when
// the exec returned (failed), keeping the exec's errno for the caller.
template <typename Exec>
int exec_traced(bool may_succeed, Exec&& exec) {
  // A stop signal taken just before (a rank told to stop as it execs) goes on before the exec.
  if (may_succeed) settle_stop_signals(kStopSignalSettleLimit);
  std::optional<int> rank;
  if (may_succeed && InjectedProcess::tracing_in_this_process()) {
    rank = InjectedProcess::current()->tracer().rank();
  }
  const bool stopped = may_succeed && InjectedProcess::stop();
  const int result = exec();
  if (stopped) {
    const int exec_errno = errno;
    // It was that rank, and is again.
    InjectedProcess::start_as_rank(rank, InjectedProcess::RankSource::kWorld);
    errno = exec_errno;
  }
  return result;
}

}  // namespace partrain::profiler::inject

using partrain::profiler::inject::exec_traced;
using partrain::profiler::inject::may_exec;
using partrain::profiler::inject::may_exec_on_path;
using partrain::profiler::inject::next_exec;

PARTRAIN_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) {
  static const auto real = next_exec<int (*)(const char*, char* const[], char* const[])>("execve");
  if (real == nullptr) return errno = ENOSYS, -1;
  return exec_traced(may_exec(path), [&] { return real(path, argv, envp); });
}

PARTRAIN_EXPORT int execv(const char* path, char* const argv[]) {
  static const auto real = next_exec<int (*)(const char*, char* const[])>("execv");
  if (real == nullptr) return errno = ENOSYS, -1;
  return exec_traced(may_exec(path), [&] { return real(path, argv); });
}

PARTRAIN_EXPORT int execvp(const char* file, char* const argv[]) {
  static const auto real = next_exec<int (*)(const char*, char* const[])>("execvp");
  if (real == nullptr) return errno = ENOSYS, -1;
  return exec_traced(may_exec_on_path(file), [&] { return real(file, argv); });
}

PARTRAIN_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) {
  static const auto real = next_exec<int (*)(const char*, char* const[], char* const[])>("execvpe");
  if (real == nullptr) return errno = ENOSYS, -1;
  return exec_traced(may_exec_on_path(file), [&] { return real(file, argv, envp); });
}

PARTRAIN_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) {
  static const auto real = next_exec<int (*)(int, char* const[], char* const[])>("fexecve");
  if (real == nullptr) return errno = ENOSYS, -1;
  return exec_traced(true, [&] { return real(fd, argv, envp); });
}
