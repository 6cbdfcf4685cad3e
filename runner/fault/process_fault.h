// The injected faults that end or stop a rank where they fire (--inject crash, exit, hang,
// stop): the abrupt ends a launcher must cope with, done the way real ones happen. All but stop
// never return. Each first flushes what `tracer` (null: not traced) still buffers, so the trace
// shows the way there.
#pragma once

#include <cstdint>

#include "profiler/rank_tracer.h"
#include "runner/fault/fault_spec.h"

namespace partrain::runner::fault {

// abort(): the rank dies by SIGABRT (the launcher exits 134). No core file is written.
[[noreturn]] void crash_rank(const FaultSpec& spec, int rank, int64_t step,
                             profiler::RankTracer* tracer);
// Ends the process at once with exit_fault_code(spec), as os._exit would: no unwinding, so the
// other ranks see this one vanish mid-step.
[[noreturn]] void exit_rank(const FaultSpec& spec, int rank, int64_t step,
                            profiler::RankTracer* tracer);
// Sleeps until the launcher stops the rank: it issues no further collective, so the others'
// collective watchdog fires (124) and the diagnosis names this rank as missing.
[[noreturn]] void hang_rank(const FaultSpec& spec, int rank, int64_t step,
                            profiler::RankTracer* tracer);
// Stops the whole process with SIGSTOP (its collective watchdog with it), as a debugger, a
// swapping host or a `kill -STOP` would: the others' watchdog fires, and the launcher must tell
// a stopped rank from a dead one. Returns once something continues the process (SIGCONT).
void stop_rank(const FaultSpec& spec, int rank, int64_t step, profiler::RankTracer* tracer);

}  // namespace partrain::runner::fault
