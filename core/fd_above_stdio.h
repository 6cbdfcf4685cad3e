// A descriptor partrain opens inside someone else's program (the injection library, the trace
// client) must never be 0, 1 or 2: a program started with stdin or stdout closed would read
// from, or print into, partrain's socket instead of seeing its standard stream closed.
#pragma once

namespace partrain {

// `fd` moved to the lowest free descriptor from 3 on (close-on-exec), the low one closed; `fd`
// itself when it is 3 or above. -1 for -1, and -1 (errno set, `fd` closed) when it cannot move.
int fd_above_stdio(int fd);

}  // namespace partrain
