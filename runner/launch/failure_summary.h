// The root cause of a failed run, said once: which rank failed first, where (host, pid), how
// (exit code or signal name), when, and its last stderr lines (or the exception its error file
// recorded); or which node was lost. The same record travels through the rendezvous store so
// every node's launcher prints the same summary and exit code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/duration.h"
#include "core/status.h"
#include "core/subprocess.h"

namespace partrain::launch {

struct RankFailure {
  int rank = 0;
  int node_rank = 0;
  std::string host;
  int64_t pid = 0;
  ExitStatus status;
  Nanoseconds elapsed{0};  // from the launch of the workers to the failure
  std::vector<std::string> stderr_tail;
  // What a Python rank recorded with torch's @record in its TORCHELASTIC_ERROR_FILE, as torchrun
  // reads it back: the exception ("ValueError: boom"), then its traceback's last lines.
  std::vector<std::string> error_report;
  // A node lost as a whole (its launcher vanished or fell silent): why; empty for a rank that
  // ended. Then rank is the node's first, pid its launcher's, and its ranks_lost ranks from
  // `rank` on are counted as lost.
  std::string node_lost;
  int ranks_lost = 0;

  // What `partrain launch` exits with: the rank's code, or 128 + signal.
  int exit_code() const { return status.exit_code(); }
};

// A likely reason for the signal ("killed by the kernel's OOM killer?"), or "".
std::string signal_hint(int signal);

// The multi-line summary printed on stderr (each line starts with "partrain: ").
// `remote`: the failure happened on another node. `after_program_end`: the rank's flight dump
// says the signal came after its program had ended (FlightDump::after_program_end); the hint
// then says so instead of guessing from the signal.
std::string format_failure_summary(const RankFailure& failure, bool remote,
                                   bool after_program_end = false);

// A rank's TORCHELASTIC_ERROR_FILE as torchrun reads it back (torch's @record writes
// {"message": {"message": "ValueError: boom", "extraInfo": {"py_callstack": ...}}}, or a plain
// "message"): the message, then the traceback's last lines. Empty when there is no file or it
// does not read (a rank killed before it could write one).
std::vector<std::string> read_error_file(const std::string& path);

// When the collective diagnosis blames another rank than the one that failed first (whose
// watchdog fired while it waited on the culprit): "partrain: rank 1 failed first because it
// waited on rank 0: start from rank 0, the culprit named above\n".
std::string format_culprit_note(const RankFailure& failure, int culprit);

// For the rendezvous store: one field per line, the stderr tail last.
std::string encode_failure(const RankFailure& failure);
StatusOr<RankFailure> decode_failure(std::string_view text);

}  // namespace partrain::launch
