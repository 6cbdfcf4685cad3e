#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <string>

namespace partrain::log {
namespace {
// Verbosity is the one process-wide setting: written once by main, read everywhere.
std::atomic<Level> g_level{Level::kInfo};
}  // namespace

void set_level(Level new_level) { g_level.store(new_level, std::memory_order_relaxed); }
Level level() { return g_level.load(std::memory_order_relaxed); }

void write(Level message_level, std::string_view message) {
  const char* prefix = "";
  switch (message_level) {
    case Level::kDebug: prefix = "debug: "; break;
    case Level::kInfo: break;
    case Level::kWarning: prefix = "warning: "; break;
    case Level::kError: prefix = "error: "; break;
  }
  // One write per line so lines of concurrent threads and ranks do not interleave.
  std::string line = fmt::format("partrain: {}{}\n", prefix, message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace partrain::log
