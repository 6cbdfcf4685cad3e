#include "runner/launch/rank_process.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace partrain::launch {

std::string_view process_condition_name(ProcessCondition condition) {
  switch (condition) {
    case ProcessCondition::kUnknown: return "unknown";
    case ProcessCondition::kRunning: return "running";
    case ProcessCondition::kStopped: return "stopped";
    case ProcessCondition::kUninterruptible: return "uninterruptible";
    case ProcessCondition::kEnded: return "ended";
  }
  return "unknown";
}

ProcessCondition condition_of_state(char state) {
  switch (state) {
    case 'R': case 'S': case 'I': return ProcessCondition::kRunning;
    case 'T': case 't': return ProcessCondition::kStopped;
    case 'D': return ProcessCondition::kUninterruptible;
    case 'Z': case 'X': case 'x': return ProcessCondition::kEnded;
    default: return ProcessCondition::kUnknown;
  }
}

char state_of_proc_stat(std::string_view line) {
  // "pid (comm) S ...": the last ')' ends the command, whatever it holds.
  const size_t close = line.rfind(')');
  if (close == std::string_view::npos || close + 2 >= line.size() || line[close + 1] != ' ') {
    return '?';
  }
  return line[close + 2];
}

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

}  // namespace

ProcessSnapshot snapshot_process(pid_t pid) {
  ProcessSnapshot snapshot;
  const std::string dir = fmt::format("/proc/{}", pid);
  snapshot.state = state_of_proc_stat(read_first_line(dir + "/stat"));
  snapshot.condition = condition_of_state(snapshot.state);
  if (snapshot.condition == ProcessCondition::kUninterruptible) {
    // "0" when the kernel hides it (kptr_restrict) or the process just woke.
    std::string wchan = read_first_line(dir + "/wchan");
    if (!wchan.empty() && wchan != "0") snapshot.wchan = std::move(wchan);
  }
  return snapshot;
}

std::string describe_rank_process(const RankProcess& process) {
  const ProcessSnapshot& seen = process.at_failure;
  switch (seen.condition) {
    case ProcessCondition::kStopped:
      return seen.state == 't' ? "stopped by a tracer (state t: a debugger holds it)"
                               : "stopped (state T: SIGSTOP or SIGTSTP)";
    case ProcessCondition::kUninterruptible:
      return seen.wchan.empty()
                 ? "stuck in the kernel (state D: a system call that does not return, or a host "
                   "swapping)"
                 : fmt::format("stuck in the kernel (state D, waiting in {}: a system call that "
                               "does not return, or a host swapping)",
                               seen.wchan);
    default: break;
  }
  if (process.ended_before_stop && process.exit) {
    return process.exit->signaled ? fmt::format("killed by {}", describe_exit(*process.exit))
                                  : fmt::format("exited with {}", describe_exit(*process.exit));
  }
  if (seen.condition == ProcessCondition::kRunning) {
    // Alive and not held: on a core (R), or sleeping in a wait it can leave (S: a Python
    // time.sleep, a lock, a read), which is where a hung program's main thread usually is.
    return seen.state == 'S' ? std::string(
                                   "alive, sleeping (state S: waiting on a timer, a lock "
                                   "or a read, not held by the kernel)")
                             : fmt::format("running (state {})", seen.state);
  }
  return std::string(process_condition_name(seen.condition));
}

}  // namespace partrain::launch
