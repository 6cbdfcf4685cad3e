// Faults injected into a built-in workload (`partrain launch --workload ... --inject SPEC`), to
// see what the launcher, the watchdog and the analyzers make of a known problem (docs/
// reliability.md). Grammar: KIND:key=value[,key=value], keys rank, step, ms, code; without
// step= a fault fires in every step (the first one, for faults that end the rank).
//   slow:rank=R,ms=M    rank R sleeps M ms before its compute
//   crash:rank=R        rank R aborts (SIGABRT: the launcher exits 134)
//   exit:rank=R,code=C  rank R exits with code C (default 1)
//   hang:rank=R         rank R stops issuing collectives; the others' watchdog fires (124)
//   stop:rank=R         rank R stops its own process (SIGSTOP), watchdog and all, as a debugger
//                       or a swapping host would; the others' watchdog fires (124)
//   desync:rank=R       rank R issues an all_gather where the others all-reduce the step's loss
//   oom:rank=R          rank R's next tracked allocation fails (exit 1)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain::runner::fault {

enum class FaultKind { kSlow, kCrash, kExit, kHang, kStop, kDesync, kOom };
std::string_view fault_kind_name(FaultKind kind);

struct FaultSpec {
  FaultKind kind = FaultKind::kSlow;
  int rank = 0;
  std::optional<int64_t> step;  // nullopt: every step
  int64_t ms = 0;               // slow only
  std::optional<int> code;      // exit only; unset: 1
};

// kInvalidArgument naming the bad part: "unknown fault kind 'x': known kinds: slow, crash, ...",
// "key 'ms' of slow needs a non-negative integer, got 'abc'", "slow needs rank=", ...
StatusOr<FaultSpec> parse_fault_spec(std::string_view text);
// Checks the spec against the run: rank inside the world, step inside the run.
Status validate_fault_spec(const FaultSpec& spec, int world, int steps);
// The canonical text, parse_fault_spec's inverse: "slow:rank=2,step=3,ms=30".
std::string fault_spec_text(const FaultSpec& spec);

// Milliseconds rank `rank` sleeps before its compute in `step` (the sum over matching slow faults).
int64_t slow_delay_ms(const std::vector<FaultSpec>& faults, int rank, int64_t step);
// The first fault of `kind` that fires on `rank` in `step`, or nullptr.
const FaultSpec* fault_at(const std::vector<FaultSpec>& faults, FaultKind kind, int rank,
                          int64_t step);
// The code an exit fault ends its rank with.
int exit_fault_code(const FaultSpec& spec);

}  // namespace partrain::runner::fault
