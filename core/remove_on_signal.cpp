#include "core/remove_on_signal.h"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>

namespace partrain {
namespace {

constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};

// A few at once is plenty (one import's output); the handler reads the slots without a lock,
// so each holds an immutable list that is only swapped whole.
struct Files {
  std::vector<std::string> paths;
};
std::array<std::atomic<const Files*>, 4> g_slots{};
// Lists taken out of their slot: a handler running on another thread may still read one, so they
// are freed at exit (a few paths per import or merge).
std::mutex g_retired_mutex;
std::vector<std::unique_ptr<const Files>> g_retired;

void remove_and_reraise(int signal_number) {
  for (std::atomic<const Files*>& slot : g_slots) {
    if (const Files* files = slot.load()) {
      for (const std::string& path : files->paths) ::unlink(path.c_str());  // async-signal-safe
    }
  }
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);
}

void install_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int signal_number : kSignals) {
      struct sigaction current {};
      if (::sigaction(signal_number, nullptr, &current) != 0) continue;
      if (current.sa_handler != SIG_DFL) continue;  // ignored, or someone else's handler
      struct sigaction action {};
      action.sa_handler = remove_and_reraise;
      sigemptyset(&action.sa_mask);
      ::sigaction(signal_number, &action, nullptr);
    }
  });
}

}  // namespace

RemoveOnSignal::RemoveOnSignal(std::vector<std::string> files) {
  install_once();
  const Files* entry = new Files{std::move(files)};
  for (size_t i = 0; i < g_slots.size(); ++i) {
    const Files* empty = nullptr;
    if (g_slots[i].compare_exchange_strong(empty, entry)) {
      slot_ = static_cast<int>(i);
      return;
    }
  }
  delete entry;
}

RemoveOnSignal::~RemoveOnSignal() {
  if (slot_ < 0) return;
  const Files* files = g_slots[static_cast<size_t>(slot_)].exchange(nullptr);
  std::lock_guard lock(g_retired_mutex);
  g_retired.emplace_back(files);
}

}  // namespace partrain
