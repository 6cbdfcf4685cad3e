// fork() without the atfork handlers libraries registered. glibc's fork() runs every prepare
// handler first, and OpenBLAS's (linked into partrain) joins its thread pool: under a memory limit
// (ulimit -v) a pool thread loops for ever on the mmap of its buffer, and the launcher hung in
// fork() before its first rank, deaf to SIGTERM (blocked for its signalfd).
#pragma once

#include <sys/types.h>

namespace partrain {

// As fork(): the child's pid in the parent, 0 in the child, -1 with errno. No handler runs on
// either side, so the child, a copy of a threaded process whose locks (malloc's among them) may
// be held, makes only async-signal-safe calls until it execs or _exits, as any child of a threaded
// process must.
pid_t fork_bare();

}  // namespace partrain
