// Starting a thread where the host may refuse one (RLIMIT_NPROC, a cgroup's pids.max): the
// refusal comes back as a Status instead of the std::system_error std::thread throws, for code
// that must never throw (the injection library) and code that fails with a Status (the launcher).
#pragma once

#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "core/status.h"

namespace partrain {

// What a user can do about a refused thread: clone gives EAGAIN at the process limit, and also
// when the thread's stack cannot be mapped under a memory limit.
inline constexpr std::string_view kThreadRefusedRemedy =
    "raise the process or memory limit (ulimit -u, ulimit -v) or the container's pids limit";

template <typename Body>
Status start_thread(std::thread& thread, Body&& body) {
  try {
    thread = std::thread(std::forward<Body>(body));
  } catch (const std::system_error& e) {
    return unavailable("the host refused a new thread ({})", e.what());
  }
  return Status::ok();
}

}  // namespace partrain
