/* The fake libnccl's profiler-plugin host: what NCCL 2.27 and later do with the library
 * NCCL_PROFILER_PLUGIN names, so the tests drive partrain's plugin as NCCL would.
 * FAKE_NCCL_PROFILER lists the plugin ABI versions this "NCCL" offers, newest first ("6,5,4":
 * NCCL 2.29; "5,4": 2.28; "4": 2.27); unset or "none": an NCCL too old for GPU timers, which
 * loads no v4+ plugin. The first table the library exports is taken, as NCCL does; a plugin
 * whose init fails is closed and NCCL carries on without it. Each communicator's tasks are
 * reported as NCCL does: the task's start (NCCL's per-function sequence number, algorithm
 * FAKE_NCCL_ALGO or "Ring", protocol "Simple", 2 channels; p2p 1 channel) with its proxy
 * operations, its host stop, then its kernel channels with GPU timers (%globaltimer: Unix ns),
 * 40 us per channel, channel c starting c us after the first. A call's kernel channels are
 * reported later (before the communicator's next call, or at its end), as NCCL's proxy thread
 * does; a group's, sorted by size as NCCL schedules them, when it ends. FAKE_NCCL_PROFILER_LOG
 * names a file where each reported task is written ("task AllReduce seq=0 count=1024
 * channels=2 gpu_ns=41000"). */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct FakeProfiledComm;

/* After a communicator's init: the plugin's context for it (NULL: no plugin). */
struct FakeProfiledComm* fake_profiler_comm_init(uint64_t comm_hash, int nranks, int rank);
/* A collective or p2p call (func as NCCL names it: "AllReduce", "Send"). */
void fake_profiler_task(struct FakeProfiledComm* comm, const char* func, size_t count, int peer);
void fake_profiler_group_start(void);
void fake_profiler_group_end(void);
/* ncclCommDestroy/Abort: pending reports, then the plugin's finalize. */
void fake_profiler_comm_end(struct FakeProfiledComm* comm);
