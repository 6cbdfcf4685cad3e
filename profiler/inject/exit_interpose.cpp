// A traced rank that ends with _exit or _Exit skips atexit, where its tracing ends: dash's `exit`
// builtin, Python's os._exit (multiprocessing's forked children end that way), a C program's
// signal handler. What it had not shipped was lost, and the collector counted a crash
// (collector_unclean_disconnects). So _exit first has the tracing ended as exit would.
//
// _exit may be called from a signal handler, where nothing but async-signal-safe calls may run:
// no allocation, no lock the interrupted code may hold. It therefore does no more than wake a
// flusher thread (started with the tracing) through an eventfd and wait on another, at most
// kFlushTimeoutMs: should the flush block on a lock the interrupted code holds, the process still
// exits, as it would have without this. A vfork()ed child's _exit (after a failed exec) leaves
// its parent's tracing alone.
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/fd_above_stdio.h"
#include "core/thread_start.h"
#include "profiler/inject/injected_process.h"

#define PARTRAIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace partrain::profiler::inject {
namespace {

constexpr int kFlushTimeoutMs = 2000;

std::mutex g_flusher_mutex;
std::atomic<int> g_request{-1};  // _exit writes here...
std::atomic<int> g_done{-1};     // ...and waits here for the flusher

void flusher_loop(int request, int done) {
  while (true) {
    uint64_t count = 0;
    const ssize_t n = ::read(request, &count, sizeof count);
    if (n < 0 && errno == EINTR) continue;
    if (n != sizeof count) return;
    (void)InjectedProcess::stop();
    const uint64_t one = 1;
    (void)!::write(done, &one, sizeof one);
  }
}

// A fork()ed child has none of the parent's threads: it starts its own flusher should it
// become a rank itself.
void forget_flusher_in_child() {
  for (std::atomic<int>* fd : {&g_request, &g_done}) {
    const int old = fd->exchange(-1);
    if (old >= 0) ::close(old);
  }
}

}  // namespace

Status start_exit_flusher() {
  std::lock_guard lock(g_flusher_mutex);
  static std::once_flag at_fork;
  std::call_once(at_fork, [] { ::pthread_atfork(nullptr, nullptr, forget_flusher_in_child); });
  if (g_request.load() >= 0) return Status::ok();
  // Never the program's closed stdin or stdout.
  const int request = fd_above_stdio(::eventfd(0, EFD_CLOEXEC));
  const int done = fd_above_stdio(::eventfd(0, EFD_CLOEXEC));
  std::thread flusher;
  const Status started =
      request < 0 || done < 0
          ? unavailable("no eventfd ({})", std::strerror(errno))
          : start_thread(flusher, [request, done] { flusher_loop(request, done); });
  if (!started.is_ok()) {
    if (request >= 0) ::close(request);
    if (done >= 0) ::close(done);
    return started;  // _exit then ends without the flush
  }
  flusher.detach();
  g_done.store(done);
  g_request.store(request);
  return Status::ok();
}

// Async-signal-safe: an atomic load, getpid, write and poll.
void flush_before_exit() {
  const int request = g_request.load();
  const int done = g_done.load();
  if (request < 0 || done < 0 || !InjectedProcess::tracing_in_this_process()) return;
  const uint64_t one = 1;
  if (::write(request, &one, sizeof one) != sizeof one) return;
  pollfd finished{done, POLLIN, 0};
  while (::poll(&finished, 1, kFlushTimeoutMs) < 0 && errno == EINTR) {
  }
}

}  // namespace partrain::profiler::inject

PARTRAIN_EXPORT void _exit(int status) {
  partrain::profiler::inject::flush_before_exit();
  ::syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

PARTRAIN_EXPORT void _Exit(int status) {
  partrain::profiler::inject::flush_before_exit();
  ::syscall(SYS_exit_group, status);
  __builtin_unreachable();
}
