// Faults injected into a built-in workload (`partrain launch --workload ... --inject SPEC`), to
// see what the analyzers make of a known problem. Grammar: KIND:key=value[,key=value], keys rank,
// step, ms, code. Kinds: slow (rank R sleeps M ms before its compute in step S, every step
// without step=). Later kinds (crash, hang, oom, desync) add to FaultKind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace partrain::runner::fault {

enum class FaultKind { kSlow };
std::string_view fault_kind_name(FaultKind kind);

struct FaultSpec {
  FaultKind kind = FaultKind::kSlow;
  int rank = 0;
  std::optional<int64_t> step;  // nullopt: every step
  int64_t ms = 0;
  std::optional<int> code;      // exit code, for kinds that exit
};

// kInvalidArgument naming the bad part: "unknown fault kind 'x': known kinds: slow", "key 'ms'
// of slow needs a non-negative integer, got 'abc'", "slow needs rank=", ...
StatusOr<FaultSpec> parse_fault_spec(std::string_view text);
// Checks the spec against the run: rank inside the world, step inside the run.
Status validate_fault_spec(const FaultSpec& spec, int world, int steps);
// The canonical text, parse_fault_spec's inverse: "slow:rank=2,step=3,ms=30".
std::string fault_spec_text(const FaultSpec& spec);

// Milliseconds rank `rank` sleeps before its compute in `step` (the sum over matching slow faults).
int64_t slow_delay_ms(const std::vector<FaultSpec>& faults, int rank, int64_t step);

}  // namespace partrain::runner::fault
