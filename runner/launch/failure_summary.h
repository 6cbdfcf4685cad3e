// The root cause of a failed run, said once: which rank failed first, where (host, pid), how
// (exit code or signal name), when, and its last stderr lines. The same record travels through
// the rendezvous store so every node's launcher prints the same summary and exit code.
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

  // What `partrain launch` exits with: the rank's code, or 128 + signal.
  int exit_code() const { return status.exit_code(); }
};

// A likely reason for the signal ("killed by the kernel's OOM killer?"), or "".
std::string signal_hint(int signal);

// The multi-line summary printed on stderr (each line starts with "partrain: ").
// `remote`: the failure happened on another node.
std::string format_failure_summary(const RankFailure& failure, bool remote);

// When the collective diagnosis blames another rank than the one that failed first (whose
// watchdog fired while it waited on the culprit): "partrain: rank 1 failed first because it
// waited on rank 0: start from rank 0, the culprit named above\n".
std::string format_culprit_note(const RankFailure& failure, int culprit);

// For the rendezvous store: one field per line, the stderr tail last.
std::string encode_failure(const RankFailure& failure);
StatusOr<RankFailure> decode_failure(std::string_view text);

}  // namespace partrain::launch
