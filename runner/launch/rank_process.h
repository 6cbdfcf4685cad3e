// How a rank's process stood when its run failed, as its launcher saw it: running, stopped
// (SIGSTOP, a debugger), stuck in the kernel (uninterruptible sleep: a system call that does not
// return, a swapping host), or ended, and how. A rank stopped or stuck cannot say so itself (its
// watchdog thread is stopped with it), so the diagnosis asks the launcher before it blames the
// transport or the rank's peers.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/subprocess.h"

namespace partrain::launch {

enum class ProcessCondition : uint8_t {
  kUnknown,          // not looked at (another node's rank, or the run did not fail)
  kRunning,          // R, S or I: on a CPU or sleeping where a signal reaches it
  kStopped,          // T (SIGSTOP, SIGTSTP) or t (stopped by a tracer)
  kUninterruptible,  // D: waiting in the kernel, deaf to signals until the call returns
  kEnded,            // exited or killed (a zombie not reaped yet counts as ended)
};
std::string_view process_condition_name(ProcessCondition condition);

// What /proc/<pid>/stat's state letter means here.
ProcessCondition condition_of_state(char state);

// The state letter of a /proc/<pid>/stat line ("1234 (partrain) T 1 ..."), or '?' when the line
// is not one: the command in parentheses may itself hold spaces and parentheses.
char state_of_proc_stat(std::string_view line);

struct ProcessSnapshot {
  ProcessCondition condition = ProcessCondition::kUnknown;
  char state = '?';   // the letter as /proc shows it
  std::string wchan;  // for D: the kernel function it waits in, when /proc lets us read it
};

// Reads /proc/<pid>/stat (and wchan for D); kUnknown when the process cannot be read.
ProcessSnapshot snapshot_process(pid_t pid);

struct RankProcess {
  int rank = 0;  // world rank
  ProcessSnapshot at_failure;  // when the run's first failure was seen, before any rank was stopped
  std::optional<ExitStatus> exit;  // how it ended
  bool ended_before_stop = false;  // it ended by itself, before the launcher stopped the run
  int64_t resumed_ns = 0;  // monotonic: when the launcher continued it (SIGCONT) after its stop
                           // signal, so that it could take it; 0: not resumed
};

// "stopped (state T: SIGSTOP, or a debugger)", "stuck in the kernel (state D, in
// io_schedule)", "exited with code 7", "killed by signal 6 (SIGABRT)", "running (state S)".
std::string describe_rank_process(const RankProcess& process);

}  // namespace partrain::launch
