// The C entry points through which partrain's Python module (share/python/partrain_torch, loaded
// by the traced command's Python processes) records what PyTorch's own hooks report: process
// groups, collectives with their completion, training steps, notices. The module finds them in
// the process's global scope (libpartrain_inject.so is preloaded) with ctypes and calls them
// holding the GIL, so each is short and never blocks: the tracer buffers. They check their
// arguments (the caller is Python code, not a peer to trust blindly, but a bad pointer must not
// take the program down) and do nothing in a process that is not traced.
//
// ABI version 4; docs/pytorch.md lists the functions. Times are CLOCK_MONOTONIC ns
// (time.monotonic_ns()), the clock of every other record.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/inject/injected_process.h"

#define PARTRAIN_EXPORT extern "C" __attribute__((visibility("default")))

namespace partrain::profiler::inject {
namespace {

constexpr int kTorchAbiVersion = 4;
constexpr size_t kMaxTextBytes = 4096;

// A C string from the caller, bounded; empty for a null pointer.
std::string_view text(const char* value, size_t max_bytes = kMaxTextBytes) {
  if (value == nullptr) return {};
  return std::string_view(value, ::strnlen(value, max_bytes));
}

// A collective as the module hands it over (little-endian, no padding; times are
// CLOCK_MONOTONIC ns): what profiler/torch_collective.h's TorchOp holds, plus the group's handle
// and the op's NCCL window. outcome: 0 completed (completed_ns 0: never seen completing),
// 1 failed, 2 issued and in flight (sent by the post hook), 3 called (sent by the pre hook: in
// flight, the backend does not have it yet), 4 issued, for an op whose completion shows only once
// the program waits on it (gloo Work without a future: the watchdog leaves it alone), 5 the
// program now waits on such an op (the watchdog times it from here). The reports of one op share
// group and issue_ns (an any-source recv's seq and root are known only at completion). Strings
// are NUL-padded, not necessarily NUL-terminated.
struct TorchCollectiveAbi {
  int32_t group;
  int32_t root;
  int32_t outcome;
  uint32_t element_bytes;
  uint64_t input_elements;
  uint64_t output_elements;
  uint64_t seq;
  int64_t issue_ns;
  int64_t issued_ns;
  int64_t completed_ns;
  uint64_t window;
  char hook_op[32];
  char dtype[16];
};
static_assert(sizeof(TorchCollectiveAbi) == 120, "the module packs 120 bytes");
static_assert(std::endian::native == std::endian::little, "the module packs little-endian");

}  // namespace
}  // namespace partrain::profiler::inject

using partrain::profiler::CollectiveEvent;
using partrain::profiler::StatEvent;
using partrain::profiler::StatSeverity;
using partrain::profiler::TorchGroup;
using partrain::profiler::TorchOp;
using partrain::profiler::inject::InjectedProcess;
using partrain::profiler::inject::kTorchAbiVersion;
using partrain::profiler::inject::text;
using partrain::profiler::inject::TorchCollectiveAbi;
using partrain::profiler::inject::TorchRecording;

// The ABI this library speaks; the module refuses another.
PARTRAIN_EXPORT int partrain_torch_abi_version(void) { return kTorchAbiVersion; }

// Makes this process a rank of the trace unless it is one already. `rank` < 0: the module was
// loaded, and the process is the launcher's rank unless its parent holds that rank; else a c10d
// process group registered with this rank: the process acts as a rank (the launcher's when one
// was published, unless the parent has it too and c10d's differs; else `rank`). 1 when it is
// traced, 0 when not.
PARTRAIN_EXPORT int partrain_torch_start(int rank) {
  if (rank < 0) return InjectedProcess::start_at_load() != nullptr ? 1 : 0;
  const auto world = InjectedProcess::RankSource::kWorld;  // c10d's rank is a world rank
  return InjectedProcess::start_as_rank(rank, world) != nullptr ? 1 : 0;
}

// A process group: c10d's name and description, its members as world ranks (`ranks[i]` is group
// rank i) and this rank's group rank. Its handle, or -1 (not traced, bad arguments, too many).
PARTRAIN_EXPORT int partrain_torch_group(const char* name, const char* desc, const int32_t* ranks,
                                         int32_t nranks, int32_t group_rank) {
  InjectedProcess* process = InjectedProcess::current();
  if (process == nullptr || nranks < 0 || nranks > (1 << 24) || (nranks > 0 && ranks == nullptr)) {
    return -1;
  }
  TorchGroup group;
  group.comm_id = partrain::profiler::torch_comm_id(text(name), text(desc));
  group.ranks.assign(ranks, ranks + nranks);
  group.rank = group_rank;
  return process->torch().add_group(std::move(group));
}

// One op as the hooks saw it, when it was called (outcome 3) and issued (outcome 2: in flight,
// for the rank's flight recorder) and again once it completed or failed (a failure dumps the
// rank's flight recorder: rank_flight.h): a TorchCollectiveAbi (above) of `size` bytes, packed
// by the module with struct.Struct("<iiiIQQQqqqQ32s16s"). One buffer instead of 13 arguments:
// ctypes converts each argument separately, and that was two thirds of the cost.
PARTRAIN_EXPORT void partrain_torch_collective(const void* record, size_t size) {
  InjectedProcess* process = InjectedProcess::current();
  if (process == nullptr || record == nullptr || size != sizeof(TorchCollectiveAbi)) return;
  TorchCollectiveAbi abi;
  std::memcpy(&abi, record, sizeof abi);
  TorchOp op;
  op.hook_op = text(abi.hook_op, sizeof abi.hook_op);
  op.dtype = text(abi.dtype, sizeof abi.dtype);
  op.input_elements = abi.input_elements;
  op.output_elements = abi.output_elements;
  op.element_bytes = abi.element_bytes;
  op.root = abi.root;
  op.seq = abi.seq;
  op.issue_ns = abi.issue_ns;
  op.issued_ns = abi.issued_ns;
  op.completed_ns = abi.completed_ns;
  op.failed = abi.outcome == 1;
  if (abi.outcome == 3) {
    process->torch().called(abi.group, op);
    return;
  }
  if (abi.outcome == 2 || abi.outcome == 4) {
    process->torch().issued(abi.group, op,
                            abi.outcome == 4
                                ? partrain::profiler::FlightRecorder::Timing::kUntimed
                                : partrain::profiler::FlightRecorder::Timing::kFromEnqueue);
    return;
  }
  if (abi.outcome == 5) {
    process->torch().waited(abi.group, op);
    return;
  }
  const std::optional<CollectiveEvent> event =
      process->torch().collective(abi.group, op, abi.window);
  if (event && op.failed) process->collective_failed(*event);
}

// The calling thread enters (or leaves) a PyTorch op on an NCCL group: the NCCL calls it makes
// in between are that op's (profiler/torch_nccl_join.h). open returns the op's window id.
PARTRAIN_EXPORT uint64_t partrain_torch_window_open(void) {
  InjectedProcess* process = InjectedProcess::current();
  if (process == nullptr) return 0;
  return process->torch().open_window(process->next_correlation_id());
}

PARTRAIN_EXPORT void partrain_torch_window_close(void) { TorchRecording::close_window(); }

// The rank is in training step `step` from local time now on (collectives issued from then on
// carry it). Steps an NVTX step marker gives win: these are then ignored.
PARTRAIN_EXPORT void partrain_torch_step_begin(int64_t step) {
  InjectedProcess* process = InjectedProcess::current();
  if (process == nullptr || step < 0 || process->nvtx_marks_steps()) return;
  process->tracer().set_step(step);
}

// Training step `step` ran from start_ns to end_ns.
PARTRAIN_EXPORT void partrain_torch_step_end(int64_t step, int64_t start_ns, int64_t end_ns) {
  InjectedProcess* process = InjectedProcess::current();
  if (process == nullptr || step < 0 || end_ns < start_ns || process->nvtx_marks_steps()) return;
  process->step_ended(step, start_ns, end_ns);
}

// Something the trace's reader must know about this rank's recording (a torch without hooks,
// the module's own failure): a stat row of `severity` (0 info, 1 data loss, 2 error).
PARTRAIN_EXPORT void partrain_torch_notice(const char* name, int32_t severity,
                                           const char* description) {
  InjectedProcess* process = InjectedProcess::current();
  if (process == nullptr || name == nullptr) return;
  StatEvent stat;
  stat.name = std::string(text(name));
  stat.rank = process->tracer().rank();
  stat.value = 1;
  stat.severity = severity == 2   ? StatSeverity::kError
                  : severity == 1 ? StatSeverity::kDataLoss
                                  : StatSeverity::kInfo;
  stat.description = std::string(text(description));
  process->tracer().emit(stat);
}

// The program has ended: partrain's Python atexit handler runs, the interpreter whole. A fatal
// signal from here on comes in the interpreter's shutdown (a gloo thread's abort: docs/pytorch.md,
// "A rank that aborts after its program ended"), and its flight dump says so to the launcher.
PARTRAIN_EXPORT void partrain_torch_program_ended(void) {
  if (InjectedProcess* process = InjectedProcess::current()) process->program_ended();
}
