#include "core/fork_bare.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace partrain {

// clone with SIGCHLD and nothing shared is fork; with a null stack the child goes on on a
// copy of the caller's, as after fork. The remaining arguments (tid pointers, TLS) are unused;
// their order differs between architectures, which zeros make moot.
pid_t fork_bare() { return static_cast<pid_t>(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0)); }

}  // namespace partrain
