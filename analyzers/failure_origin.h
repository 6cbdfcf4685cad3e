// Where a failed run's failure began when the rank that failed first only waited: its exception
// is a peer's failure reaching it (a timeout, a connection the peer closed), so the cause is the
// rank it waited on. Read from the trace whoever launched the job (partrain launch's exits or
// torchrun's ranks), from what the waiting rank was in when it failed and who never entered it
// (docs/pytorch.md, "A rank that fails").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "profiler/trace_reader/trace_reader.h"

namespace partrain::analyzers {

// What a rank's exception says when a peer's failure reached it rather than its own code failing:
// it rose out of a torch.distributed call, or the transport lost the peer under it (gloo's
// "Connection closed by peer" and "Read error ...: Connection reset by peer", raised from wherever
// the rank waited: DDP's hooks in the autograd engine, a Work's wait), or gave up waiting for it.
bool reached_from_a_peer(const std::string& exception);

// What `rank`'s atexit said of its gloo groups (stat torch_gloo_groups_at_exit): written only by
// the recorder's atexit handler, so it also says the rank's program had ended. nullopt without it.
std::optional<std::string> program_end_stat(const std::vector<profiler::StatRow>& stats, int rank);

enum class OriginKind {
  kEnded,     // the other rank ended its program (exit code 0, a clean goodbye, or its atexit ran
              // and then the interpreter's shutdown stopped it) before entering the op
  kHung,      // it raised nothing and had no collective in flight: it was elsewhere, then stopped
  kRaised,    // it raised an exception of its own code
  kDeadlock,  // it waited in an op the failing rank never entered: the two wait on each other
};

struct FailureOrigin {
  OriginKind kind = OriginKind::kHung;
  int waiter = 0;  // the rank that failed waiting (the first to fail, or the first to raise)
  std::string waiter_exception;  // its exception: a peer's failure reaching it
  int rank = 0;    // the rank it waited on
  // "all_reduce seq 6 of default_pg:0": the op the waiter failed in, which `rank` never entered.
  std::string awaited;
  double awaited_from_s = 0;  // when the waiter entered it and failed in it, since the run began
  double failed_at_s = 0;
  // When `rank`'s last recorded collective ended, since the run began; nullopt: it recorded none.
  // (Its process may end later: a gloo group's teardown waits for its peers.)
  std::optional<double> last_collective_s;
  // How `rank` ended: "exited (code 0)", "was stopped by signal 15 (SIGTERM)", "ended its
  // program (its atexit handlers ran)", "" when unknown.
  std::string exit;
  // kEnded after its program ended (stat torch_gloo_groups_at_exit), when its process did not
  // then exit cleanly: "; it then was stopped by signal 6 (SIGABRT) in the interpreter's
  // shutdown, ...". PyTorch's gloo threads abort a process so after the program ends.
  std::string after_end;
  std::string exception;  // kRaised: its exception
  std::string own_wait;   // kDeadlock: the op `rank` waited in, which the waiter never entered
};

// The origin of a run whose `failing_rank` failed on a peer's failure (`failing_exception`
// reached_from_a_peer), else nullopt: the first member of the op it failed in that never
// recorded that op, and how that rank stood. `ranks`, `stats`: the trace's.
StatusOr<std::optional<FailureOrigin>> trace_failure_origin(
    const profiler::TraceReader& reader, int failing_rank, const std::string& failing_exception,
    const std::vector<profiler::RankRow>& ranks, const std::vector<profiler::StatRow>& stats);

}  // namespace partrain::analyzers
