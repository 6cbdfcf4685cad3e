// A library's atfork prepare handler that does not return: OpenBLAS's joins its pool's threads,
// which loop for ever on the mmap of their buffers under a memory limit (ulimit -v). While a
// StuckAtfork lives, a fork() that runs the handlers is held up for 5 s.
#pragma once

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

namespace partrain::testing {

class StuckAtfork {
 public:
  StuckAtfork() {
    static std::once_flag registered;
    std::call_once(registered, [] { ::pthread_atfork(hold, nullptr, nullptr); });
    held().store(true);
  }
  ~StuckAtfork() { held().store(false); }
  StuckAtfork(const StuckAtfork&) = delete;
  StuckAtfork& operator=(const StuckAtfork&) = delete;

 private:
  static std::atomic<bool>& held() {
    static std::atomic<bool> flag{false};
    return flag;
  }
  static void hold() {
    for (int i = 0; i < 500 && held().load(); ++i) ::usleep(10'000);
  }
};

}  // namespace partrain::testing
