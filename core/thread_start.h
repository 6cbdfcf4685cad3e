// Starting a thread where the host may refuse one (RLIMIT_NPROC, a cgroup's pids.max): the
// refusal comes back as a Status instead of the std::system_error std::thread throws, for code
// that must never throw (the injection library) and code that fails with a Status (the launcher).
#pragma once

#include <system_error>
#include <thread>
#include <utility>

#include "core/status.h"

namespace partrain {

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
