// Lets a worker do one last thing when its launcher stops it: SIGTERM, SIGINT and SIGHUP are
// blocked in every thread and taken by a thread of their own, which runs a callback (the flight
// recorder's dump) and then lets the signal end the process as it would have, so the launcher
// still sees a rank killed by that signal.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <thread>

namespace partrain::runner {

class StopSignalWatch {
 public:
  using BeforeExit = std::function<void(int signal)>;

  // Must run before any other thread of the process starts: threads inherit the blocked mask,
  // and a thread started earlier would take the signal and die without the callback.
  static std::unique_ptr<StopSignalWatch> start(BeforeExit before_exit);
  // Stops watching and unblocks the signals again (a pending one is then delivered).
  ~StopSignalWatch();
  StopSignalWatch(const StopSignalWatch&) = delete;
  StopSignalWatch& operator=(const StopSignalWatch&) = delete;

 private:
  explicit StopSignalWatch(BeforeExit before_exit);
  void run();

  BeforeExit before_exit_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace partrain::runner
